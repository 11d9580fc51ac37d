// The error middleware on its own: every failure becomes an OpenAI-shaped error and the app keeps serving.

import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import express from "express";
import request from "supertest";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { errorHandler, unknownRoute } from "../../api/http/error-handler.js";
import { acceptUpload } from "../../api/http/upload.js";
import { InvalidRequestError, NotFoundError, queueFull, shuttingDown } from "../../domain/errors.js";
import { uploadDir } from "../../stores/fs-blob-store.js";

const batchDir = mkdtempSync(path.join(os.tmpdir(), "obi-errors-"));
afterAll(() => rmSync(batchDir, { recursive: true, force: true }));
/** What is left in the upload temp dir (an upload refused early may never have created it). */
const uploads = () => (existsSync(uploadDir(batchDir)) ? readdirSync(uploadDir(batchDir)) : []);

const MAX_FILE_BYTES = 64;

function app() {
  const a = express();
  a.use(express.json({ limit: 1024 }));
  a.post("/json", (req, res) => {
    res.json({ got: req.body });
  });
  a.get("/api-error", () => {
    throw queueFull(30);
  });
  a.get("/draining", () => {
    throw shuttingDown(5);
  });
  a.get("/missing", () => {
    throw new NotFoundError("batch", "batch_x");
  });
  a.get("/invalid", () => {
    throw new InvalidRequestError("Invalid completion_window 'x'.", "invalid_request", "completion_window");
  });
  a.get("/zod", () => {
    z.object({ limit: z.number() }).parse({ limit: "x" });
  });
  a.get("/boom", () => {
    throw new Error("secret detail at /srv/internal/path");
  });
  a.get("/async-boom", async () => {
    await Promise.resolve();
    throw Object.assign(new Error("db down"), { status: 502 });
  });
  // A real ENOSPC: /dev/full refuses every write with "no space left on device".
  a.get("/disk-full", async () => {
    await writeFile("/dev/full", "x");
  });
  a.get("/throws-string", () => {
    throw "not an error object";
  });
  a.get("/after-headers", (_req, res, next) => {
    res.write("partial");
    next(new Error("stream broke"));
  });
  a.post("/upload", acceptUpload({ batchDir, maxFileBytes: MAX_FILE_BYTES }), (req, res) => {
    res.json({ size: req.file?.size });
  });
  a.use(unknownRoute);
  a.use(errorHandler({ maxFileBytes: MAX_FILE_BYTES }));
  return a;
}

const expectOpenAiError = (body: any) =>
  expect(body).toEqual({
    error: {
      message: expect.any(String),
      type: expect.any(String),
      param: expect.toBeOneOf([expect.any(String), null]),
      code: expect.toBeOneOf([expect.any(String), null]),
    },
  });

describe("error handler", () => {
  const a = app();

  it("answers malformed JSON with 400 invalid_json", async () => {
    const res = await request(a).post("/json").set("content-type", "application/json").send('{"model": ');
    expect(res.status).toBe(400);
    expectOpenAiError(res.body);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_json" });
  });

  it("refuses a JSON body that is a string, a number or null for what it is, not as unparsable", async () => {
    for (const [body, kind] of [
      ['"hello"', "a string"],
      [" 42", "a number"],
      ["null", "null"],
    ]) {
      const res = await request(a).post("/json").set("content-type", "application/json").send(body);
      expect(res.status).toBe(400);
      expectOpenAiError(res.body);
      expect(res.body.error).toMatchObject({ code: "invalid_request", message: `The request body must be a JSON object, not ${kind}.` });
    }
  });

  it("answers an oversized JSON body with 413", async () => {
    const res = await request(a)
      .post("/json")
      .send({ text: "x".repeat(2000) });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe("request_too_large");
  });

  it("answers unknown routes and methods with a 404 JSON error", async () => {
    for (const res of [await request(a).get("/v1/nothing-here"), await request(a).put("/json")]) {
      expect(res.status).toBe(404);
      expect(res.headers["content-type"]).toMatch(/application\/json/);
      expectOpenAiError(res.body);
      expect(res.body.error.message).toMatch(/^Invalid URL \((GET|PUT) \//);
    }
  });

  it("renders the control plane's refusals with their status, code and headers", async () => {
    const res = await request(a).get("/api-error");
    expect(res.status).toBe(429);
    expect(res.headers["retry-after"]).toBe("30");
    expect(res.body.error).toMatchObject({ type: "rate_limit_error", code: "queue_full", param: null });
    const draining = await request(a).get("/draining");
    expect(draining.status).toBe(503);
    expect(draining.headers["retry-after"]).toBe("5");
    expect(draining.body.error).toMatchObject({ type: "server_error", code: "shutting_down" });
    expect((await request(a).get("/missing")).body).toEqual({
      error: { message: "No batch found with id 'batch_x'.", type: "invalid_request_error", param: null, code: "not_found" },
    });
    const invalid = await request(a).get("/invalid");
    expect(invalid.status).toBe(400);
    expect(invalid.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_request", param: "completion_window" });
  });

  it("turns a stray ZodError into a 400 naming the param", async () => {
    const res = await request(a).get("/zod");
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", param: "limit" });
  });

  it.skipIf(!existsSync("/dev/full"))("answers a full disk with 507 storage_full and Retry-After, not a 500", async () => {
    const res = await request(a).get("/disk-full");
    expect(res.status).toBe(507);
    expect(res.headers["retry-after"]).toBe("30");
    expect(res.body.error).toMatchObject({ type: "server_error", code: "storage_full", param: null });
  });

  it("hides unexpected errors behind a plain 500 and keeps serving", async () => {
    for (const p of ["/boom", "/async-boom", "/throws-string"]) {
      const res = await request(a).get(p);
      expect(res.status).toBe(500);
      expect(res.body).toEqual({
        error: {
          message: "The server had an error while processing your request.",
          type: "server_error",
          param: null,
          code: "internal_error",
        },
      });
      expect(res.text).not.toMatch(/secret|stack|\/srv|db down/);
    }
    expect((await request(a).post("/json").send({ a: 1 })).body).toEqual({ got: { a: 1 } });
  });

  it("cuts a response short when it fails after the headers went out", async () => {
    await expect(request(a).get("/after-headers")).rejects.toThrow();
    expect((await request(a).get("/api-error")).status).toBe(429);
  });

  it("answers an oversized upload with 413 and leaves no partial file behind", async () => {
    const res = await request(a).post("/upload").field("purpose", "batch").attach("file", Buffer.alloc(10_000, "x"), "big.jsonl");
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", param: "file", code: "file_too_large" });
    expect(res.body.error.message).toContain(String(MAX_FILE_BYTES));
    expect(uploads()).toEqual([]);
  });

  it("answers a second file part or a broken multipart body with 400", async () => {
    const two = await request(a).post("/upload").attach("file", Buffer.from("{}"), "a.jsonl").attach("other", Buffer.from("{}"), "b.jsonl");
    expect(two.status).toBe(400);
    expect(two.body.error.param).toBe("file");
    const broken = await request(a).post("/upload").set("content-type", "multipart/form-data; boundary=xyz").send("--xyz\r\nnonsense");
    expect(broken.status).toBe(400);
    expectOpenAiError(broken.body);
    expect(broken.body.error.code).toBe("invalid_multipart");
    expect(uploads()).toEqual([]);
  });

  it("says what is wrong with a form past an upload's bounds, naming a field only where one is at fault", async () => {
    // 5,000 fields: the form is wrong, not its purpose.
    let many = request(a).post("/upload").field("purpose", "batch");
    for (let i = 0; i < 5_000; i++) many = many.field(`f${i}`, "x");
    const tooMany = await many.attach("file", Buffer.from("{}"), "a.jsonl");
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error).toMatchObject({ code: "invalid_multipart", param: null });
    expect(tooMany.body.error.message).toMatch(/more than \d+ (fields|parts)/);
    expect(tooMany.body.error.message).not.toMatch(/Too many fields/);
    const long = await request(a).post("/upload").field("purpose", "x".repeat(5_000)).attach("file", Buffer.from("{}"), "a.jsonl");
    expect(long.body.error).toMatchObject({ code: "invalid_multipart", param: "purpose" });
    expect(long.body.error.message).toContain("'purpose' is longer than 4096 bytes");
    expect(uploads()).toEqual([]);
  });
});
