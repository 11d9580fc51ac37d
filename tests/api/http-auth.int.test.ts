// API keys: required on /v1 (and the operational views) when configured, never needed for health and docs,
// never written to the log, and each key sees only its own objects. Real control plane and engine.
import { Writable } from "node:stream";
import pino from "pino";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../api/http/app.js";
import { ownerOf, requireApiKey } from "../../api/http/auth.js";
import { startTestService, type TestService } from "../helpers/service.js";

const KEY_A = "sk-test-alpha-0123456789";
const KEY_B = "sk-test-bravo-9876543210";

let svc: TestService;
let app: ReturnType<typeof createApp>;
let logText = "";

beforeAll(async () => {
  svc = await startTestService({ API_KEYS: `${KEY_A},${KEY_B}` });
  // Our own app over the service's real stores, with a logger we can read back.
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logText += chunk.toString();
      cb();
    },
  });
  const cp = svc.service.controlPlane;
  app = createApp({
    config: svc.config,
    files: cp.files,
    batches: cp.batches,
    views: cp.views,
    status: cp.status,
    backendInfo: () => svc.service.backend.info,
    registry: svc.service.models.registry,
    logger: pino({ level: "info" }, sink),
  });
});
afterAll(async () => svc?.close());

const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
const line = JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/completions", body: { prompt: "Once", max_tokens: 2 } });

describe("ownerOf", () => {
  it("is a stable 32-hex-digit hash that differs per key and does not contain it", () => {
    expect(ownerOf(KEY_A)).toMatch(/^[0-9a-f]{32}$/);
    expect(ownerOf(KEY_A)).toBe(ownerOf(KEY_A));
    expect(ownerOf(KEY_A)).not.toBe(ownerOf(KEY_B));
    expect(ownerOf(KEY_A)).not.toContain("alpha");
  });
});

describe("requireApiKey without keys", () => {
  it("lets every request through with owner null", () => {
    const res: any = { locals: {} };
    let called = false;
    requireApiKey([])({ get: () => undefined } as any, res, () => (called = true));
    expect(called).toBe(true);
    expect(res.locals.owner).toBeNull();
  });
});

describe("with API_KEYS set", () => {
  it("answers 401 OpenAI-shaped without a key, with a wrong key, or with another scheme", async () => {
    const attempts = [
      request(app).get("/v1/files"),
      request(app).get("/v1/batches"),
      request(app).post("/v1/batches").send({}),
      request(app).get("/v1/batches/batch_6a1f0c2e9b7d4e3f8a5b1c0d"),
      request(app).get("/v1/no-such-route"),
      request(app).get("/queue/stats"),
      request(app).get("/pools"),
      request(app).get("/v1/files").set(bearer("sk-wrong")),
      request(app).get("/v1/files").set("Authorization", `Basic ${KEY_A}`),
      request(app).get("/v1/files").set("Authorization", "Bearer"),
    ];
    // OpenAI's 401: invalid_request_error; code invalid_api_key for a wrong key (the eighth attempt), null for none.
    for (const [i, res] of (await Promise.all(attempts)).entries()) {
      expect(res.status).toBe(401);
      expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: i === 7 ? "invalid_api_key" : null, param: null });
    }
  });

  it("serves /v1 with a valid key (the header's scheme is case-insensitive)", async () => {
    expect((await request(app).get("/v1/batches").set(bearer(KEY_A))).status).toBe(200);
    expect((await request(app).get("/v1/files").set("Authorization", `bearer ${KEY_B}`)).status).toBe(200);
    expect((await request(app).get("/queue/stats").set(bearer(KEY_A))).status).toBe(200);
  });

  it("keeps health, readiness, the banner and the docs open", async () => {
    for (const p of ["/", "/health", "/ready", "/openapi.json", "/docs/"]) {
      expect((await request(app).get(p)).status, p).toBe(200);
    }
  });

  it("scopes files and batches to the key that made them", async () => {
    const up = await request(app)
      .post("/v1/files")
      .set(bearer(KEY_A))
      .field("purpose", "batch")
      .attach("file", Buffer.from(`${line}\n`), "a.jsonl");
    expect(up.status).toBe(200);
    const id = up.body.id;
    expect((await request(app).get(`/v1/files/${id}`).set(bearer(KEY_A))).status).toBe(200);
    expect((await request(app).get(`/v1/files/${id}`).set(bearer(KEY_B))).status).toBe(404);
    expect((await request(app).get(`/v1/files/${id}/content`).set(bearer(KEY_B))).status).toBe(404);
    expect((await request(app).get("/v1/files").set(bearer(KEY_B))).body.data.map((f: any) => f.id)).not.toContain(id);
    // Another key cannot start a batch from it either.
    const stolen = await request(app).post("/v1/batches").set(bearer(KEY_B)).send({ input_file_id: id, endpoint: "/v1/completions" });
    expect(stolen.status).toBe(404);
    expect(stolen.body.error.param).toBe("input_file_id");

    const b = await request(app).post("/v1/batches").set(bearer(KEY_A)).send({ input_file_id: id, endpoint: "/v1/completions" });
    expect(b.status).toBe(200);
    expect((await request(app).get(`/v1/batches/${b.body.id}`).set(bearer(KEY_B))).status).toBe(404);
    expect((await request(app).post(`/v1/batches/${b.body.id}/cancel`).set(bearer(KEY_B))).status).toBe(404);
    expect((await request(app).get("/v1/batches").set(bearer(KEY_B))).body.data.map((x: any) => x.id)).not.toContain(b.body.id);
    expect((await request(app).delete(`/v1/files/${id}`).set(bearer(KEY_B))).status).toBe(404);
  });

  it("never writes a key or the Authorization header to the log, and tags lines with the request id", async () => {
    await request(app).get("/v1/files").set(bearer(KEY_A)).set("x-request-id", "trace-me-42");
    await request(app).get("/v1/files").set(bearer("sk-a-wrong-key-to-log"));
    expect(logText).toContain("trace-me-42");
    expect(logText).not.toContain(KEY_A);
    expect(logText).not.toContain(KEY_B);
    expect(logText).not.toContain("sk-a-wrong-key-to-log");
    expect(logText.toLowerCase()).not.toContain("authorization");
  });
});
