// The open routes on their own (health, readiness), with the states a real service passes through.
import express from "express";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { errorHandler } from "../../api/http/error-handler.js";
import { systemRouter } from "../../api/routes/system.js";
import type { BackendInfo } from "../../openai/backend.js";

const info: BackendInfo = {
  kind: "local",
  model: "tiny",
  endpoints: ["/v1/completions"],
  concurrency: 4,
  generatedModel: false,
  settings: {},
} as unknown as BackendInfo;

function app(storage: () => string) {
  const a = express();
  a.use(systemRouter({ service: { name: "obi", version: "0" }, backendInfo: () => info, storage }));
  a.use(errorHandler({ maxFileBytes: 1 }));
  return a;
}

describe("GET /ready and the disk", () => {
  it("answers 200 with storage ok while the disk takes writes", async () => {
    const res = await request(app(() => "ok")).get("/ready");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "ready", storage: { state: "ok" } });
  });

  // A probe reads only the status: a 200 would keep sending uploads and creates to a server that must refuse them.
  it.each([
    ["full", /full/, /507/],
    ["read_only", /read-only|refuses writes/, /503/],
  ])("answers 503 while the disk is %s, saying why and what still works", async (state, why, writes) => {
    const res = await request(app(() => state)).get("/ready");
    expect(res.status).toBe(503);
    expect(res.headers["retry-after"]).toMatch(/^\d+$/);
    expect(res.body.error).toMatchObject({ type: "server_error", code: "storage_not_writable", param: null });
    expect(res.body.error.message).toMatch(why);
    expect(res.body.error.message).toMatch(writes);
    expect(res.body.error.message).toMatch(/reads/);
    expect(res.body.storage).toEqual({ state });
  });

  it("answers 200 again once the disk heals, and /health stays 200 throughout", async () => {
    let state = "full";
    const a = app(() => state);
    expect((await request(a).get("/ready")).status).toBe(503);
    expect((await request(a).get("/health")).status).toBe(200);
    state = "ok";
    expect((await request(a).get("/ready")).status).toBe(200);
  });
});
