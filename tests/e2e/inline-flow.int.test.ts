// The inline form's flow (the README's curl demo), through supertest against the real app and engine.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const readJsonl = (p: string) =>
  readFileSync(p, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));

describe("the inline form, end to end", () => {
  it("runs the README's inline curl demo and leaves the job's files in BATCH_DIR/<batch_id>/", async () => {
    const res = await request(svc.service.app)
      .post("/v1/batches")
      .send({ model: "Qwen/Qwen2.5-0.5B-Instruct", input: [{ prompt: "What is 2+2?" }, { prompt: "Hello world" }], max_tokens: 50 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: "batch", endpoint: "/v1/completions", status: "validating" });
    expect(res.body.deadline_at - res.body.submitted_at).toBe(24 * 3600);

    const batch = await waitForBatch(svc.baseUrl, res.body.id);
    expect(batch.status).toBe("completed");
    expect(batch.request_counts).toEqual({ completed: 2, failed: 0, total: 2 });
    expect(["spot", "dedicated"]).toContain(batch.pool);
    expect(batch.deadline_met).toBe(true);

    const dir = path.join(svc.batchDir, batch.id);
    expect(readdirSync(dir).sort()).toEqual(expect.arrayContaining(["batch.json", "input.jsonl", "output.jsonl"]));
    expect(existsSync(path.join(dir, "errors.jsonl"))).toBe(false);
    const input = readJsonl(path.join(dir, "input.jsonl"));
    expect(input[0]).toMatchObject({ method: "POST", url: "/v1/completions", body: { prompt: "What is 2+2?", max_tokens: 50 } });
    const output = readJsonl(path.join(dir, "output.jsonl"));
    expect(output).toHaveLength(2);
    for (const o of output) {
      expect(o.response.body.object).toBe("text_completion");
      // The curl demo names Qwen; the response names the model that actually answered.
      expect(o.response.body.model).toBe(svc.service.backend.info.model);
      expect(typeof o.response.body.choices[0].text).toBe("string");
      expect(o.response.body.usage.total_tokens).toBe(o.response.body.usage.prompt_tokens + o.response.body.usage.completion_tokens);
    }

    const results = await request(svc.service.app).get(`/v1/batches/${batch.id}/results`);
    expect(results.status).toBe(200);
    expect(results.body.data).toHaveLength(2);
  });

  it("reports queue and pool status", async () => {
    const q = await request(svc.service.app).get("/queue/stats");
    expect(q.status).toBe(200);
    expect(q.body).toMatchObject({ depth: expect.any(Number), max_depth: 100 });
    const pools = await request(svc.service.app).get("/pools");
    expect(pools.status).toBe(200);
    expect(JSON.stringify(pools.body)).toContain("spot");
    expect(JSON.stringify(pools.body)).toContain("dedicated");
  });

  it("fails an invalid file with line-numbered errors and runs nothing", async () => {
    const good = JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/completions", body: { model: "m", prompt: "hi" } });
    const content = [
      good,
      "{not json",
      good,
      JSON.stringify({ custom_id: "b", method: "POST", url: "/v1/embeddings", body: { input: "x" } }),
    ].join("\n");
    const up = await request(svc.service.app).post("/v1/files").field("purpose", "batch").attach("file", Buffer.from(content), "bad.jsonl");
    expect(up.status).toBe(200);
    const res = await request(svc.service.app)
      .post("/v1/batches")
      .send({ input_file_id: up.body.id, endpoint: "/v1/completions", completion_window: "24h" });
    expect(res.status).toBe(200);
    const batch = await waitForBatch(svc.baseUrl, res.body.id);
    expect(batch.status).toBe("failed");
    const lines = batch.errors.data.map((e: any) => e.line).sort();
    expect(lines).toEqual([2, 3, 4]);
    expect(batch.errors.data.map((e: any) => e.code)).toContain("duplicate_custom_id");
    expect(batch.output_file_id).toBeNull();
    expect(batch.request_counts.completed).toBe(0);
  });

  it("runs embeddings and completions batches with OpenAI body shapes", async () => {
    const content = ["alpha", "beta", "gamma"]
      .map((w, i) => JSON.stringify({ custom_id: `e${i}`, method: "POST", url: "/v1/embeddings", body: { model: "m", input: w } }))
      .join("\n");
    const up = await request(svc.service.app).post("/v1/files").field("purpose", "batch").attach("file", Buffer.from(content), "emb.jsonl");
    const res = await request(svc.service.app)
      .post("/v1/batches")
      .send({ input_file_id: up.body.id, endpoint: "/v1/embeddings", completion_window: "1h" });
    const batch = await waitForBatch(svc.baseUrl, res.body.id);
    expect(batch.status).toBe("completed");
    const out = await request(svc.service.app).get(`/v1/files/${batch.output_file_id}/content`);
    const rows = out.text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows).toHaveLength(3);
    const body = rows[0].response.body;
    expect(body.object).toBe("list");
    expect(body.data[0].object).toBe("embedding");
    expect(body.data[0].embedding.length).toBe(svc.service.backend.info.settings.embeddingDimensions);
  });

  it("serves health, readiness, the OpenAPI document and Swagger UI", async () => {
    const app = svc.service.app;
    expect((await request(app).get("/health")).status).toBe(200);
    const ready = await request(app).get("/ready");
    expect(ready.status).toBe(200);
    expect(JSON.stringify(ready.body)).toContain(svc.service.backend.info.model);
    const doc = await request(app).get("/openapi.json");
    for (const p of [
      "/v1/files",
      "/v1/files/{file_id}",
      "/v1/files/{file_id}/content",
      "/v1/batches",
      "/v1/batches/{batch_id}",
      "/v1/batches/{batch_id}/cancel",
    ]) {
      expect(Object.keys(doc.body.paths)).toContain(p);
    }
    const docs = await request(app).get("/docs/").redirects(1);
    expect(docs.status).toBe(200);
    expect(docs.text).toContain("swagger-ui");
    const notFound = await request(app).get("/nope");
    expect(notFound.status).toBe(404);
    expect(notFound.body.error).toMatchObject({ type: "invalid_request_error" });
  });
});
