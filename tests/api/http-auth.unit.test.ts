// Bearer-key authentication on its own, judged by the official clients: a missing or wrong key is OpenAI's 401
// (type invalid_request_error, as api.openai.com answers it) on OpenAI's routes and Anthropic's on /v1/messages.
import type { AddressInfo } from "node:net";
import Anthropic from "@anthropic-ai/sdk";
import express from "express";
import OpenAI from "openai";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireApiKey } from "../../api/http/auth.js";
import { errorHandler } from "../../api/http/error-handler.js";

const KEY = "sk-test-unit-0123456789";

function app() {
  const a = express();
  a.use("/v1", requireApiKey([KEY]));
  a.get("/v1/models", (_req, res) => {
    res.json({ object: "list", data: [] });
  });
  a.get("/v1/messages/batches", (_req, res) => {
    res.json({ data: [], has_more: false, first_id: null, last_id: null });
  });
  a.use(errorHandler({ maxFileBytes: 1 }));
  return a;
}

let server: ReturnType<express.Express["listen"]>;
let baseUrl = "";
beforeAll(async () => {
  server = app().listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe("a missing or wrong key on OpenAI's routes", () => {
  it("no key: 401 invalid_request_error with code null and how to send one, as OpenAI answers", async () => {
    const res = await request(app()).get("/v1/models");
    expect(res.status).toBe(401);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: null, param: null });
    expect(res.body.error.message).toMatch(/didn't provide an API key.*Authorization: Bearer/);
  });

  it.each([
    ["a wrong key", { authorization: "Bearer sk-wrong" }],
    ["a wrong x-api-key", { "x-api-key": "sk-wrong" }],
  ])("%s: 401 invalid_request_error, code invalid_api_key", async (_what, headers) => {
    const res = await request(app()).get("/v1/models").set(headers);
    expect(res.status).toBe(401);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_api_key", param: null });
    expect(res.body.error.message).toMatch(/^Incorrect API key provided/);
  });

  it("the openai client raises AuthenticationError with OpenAI's type", async () => {
    const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: "sk-wrong", maxRetries: 0 });
    const err = await client.models.list().catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(err).toMatchObject({ status: 401, type: "invalid_request_error", code: "invalid_api_key" });
    const ok = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: KEY, maxRetries: 0 });
    expect((await ok.models.list()).data).toEqual([]);
  });

  it("Anthropic's routes keep Anthropic's envelope: authentication_error", async () => {
    const client = new Anthropic({ baseURL: baseUrl, apiKey: "sk-wrong", maxRetries: 0 });
    const err = await client.messages.batches.list().catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(err.error).toMatchObject({ type: "error", error: { type: "authentication_error" } });
  });
});
