// GET /metrics after real batches on the real engine: every value the service exports, with bounded labels; and
// the batch lines that gave their sequence to a synchronous request, counted per model.
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetrics } from "../../metrics/metrics.js";
import { RateWindow } from "../../metrics/rate-window.js";
import { isFinal, pollBatch } from "../../testkit/batch-client.js";
import { NEVER_ENDS } from "../helpers/long-stream.js";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ SPOT_CAPACITY: "2", DEDICATED_CAPACITY: "1" });
});
afterAll(async () => svc?.close());

const app = () => svc.service.app;
const chat = (id: string, content: string, maxTokens = 8) =>
  JSON.stringify({
    custom_id: id,
    method: "POST",
    url: "/v1/chat/completions",
    body: { messages: [{ role: "user", content }], max_tokens: maxTokens },
  });

async function submit(lines: string[], window = "24h") {
  const file = await request(app())
    .post("/v1/files")
    .field("purpose", "batch")
    .attach("file", Buffer.from(lines.join("\n")), "in.jsonl");
  const res = await request(app())
    .post("/v1/batches")
    .send({ input_file_id: file.body.id, endpoint: "/v1/chat/completions", completion_window: window });
  expect(res.status).toBe(200);
  return res.body;
}

/** The value of one sample, matched on its name and exactly these labels (undefined when absent). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.keys(labels).length === Object.keys(got).length && Object.entries(labels).every(([k, v]) => got[k] === v))
      return Number(m[3]);
  }
  return undefined;
}

describe("GET /metrics", () => {
  it("counts a real batch: final status, request outcomes, tokens, SLA, latency, queue and pools", async () => {
    // ~2,000 tokens overflow the 512-token context: one failed request in an otherwise completed batch.
    const created = await submit([chat("a", "Once upon a time"), chat("b", "The dog"), chat("huge", "word ".repeat(2000))]);
    const batch = await waitForBatch(svc.baseUrl, created.id);
    expect(batch.status).toBe("completed");
    const invalid = await submit(["{not json"]);
    expect(invalid.status).toBe("failed");
    await request(app()).get("/no/such/route").expect(404);

    const res = await request(app()).get("/metrics");
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
    const m = res.text;
    const ep = "/v1/chat/completions";
    expect(sample(m, "obi_batches_total", { status: "completed" })).toBe(1);
    expect(sample(m, "obi_batches_total", { status: "failed" })).toBe(1);
    expect(sample(m, "obi_batch_requests_total", { endpoint: ep, outcome: "completed" })).toBe(2);
    expect(sample(m, "obi_batch_requests_total", { endpoint: ep, outcome: "failed" })).toBe(1);
    expect(sample(m, "obi_prompt_tokens_total", { endpoint: ep })).toBe(batch.usage.input_tokens);
    expect(sample(m, "obi_completion_tokens_total", { endpoint: ep })).toBe(batch.usage.output_tokens);
    expect(batch.usage.output_tokens).toBeGreaterThan(0);
    expect(sample(m, "obi_sla_deadlines_total", { result: "met" })).toBe(1);
    expect(sample(m, "obi_batch_time_to_finish_seconds_count", { status: "completed" })).toBe(1);
    expect(sample(m, "obi_batch_time_to_finish_seconds_bucket", { status: "completed", le: "+Inf" })).toBe(1);
    expect(sample(m, "obi_http_requests_total", { method: "POST", route: "/v1/batches", code: "200" })).toBe(2);
    expect(sample(m, "obi_http_requests_total", { method: "GET", route: "/v1/batches/:batch_id", code: "200" })).toBeGreaterThan(0);
    expect(sample(m, "obi_http_requests_total", { method: "GET", route: "unmatched", code: "404" })).toBe(1);
    expect(sample(m, "obi_http_request_duration_seconds_count", { method: "POST", route: "/v1/files" })).toBe(2);
    expect(sample(m, "obi_queue_depth", { scope: "cluster" })).toBe(0);
    expect(sample(m, "obi_queue_max_depth", { scope: "cluster" })).toBe(svc.config.maxQueueDepth);
    expect(sample(m, "obi_pool_capacity", { pool: "spot" })).toBe(2);
    expect(sample(m, "obi_pool_capacity", { pool: "dedicated" })).toBe(1);
    expect(sample(m, "obi_pool_in_use", { pool: "spot" })).toBe(0);
    expect(sample(m, "obi_engine_tokens_per_second")).toBeGreaterThanOrEqual(0);
    expect(sample(m, "obi_backend_info", { model: svc.service.backend.info.model, backend: "local" })).toBe(1);
    const build = svc.service.backend.info.settings.engineBuild;
    expect(["prebuilt", "patched"]).toContain(build);
    expect(sample(m, "obi_engine_build_info", { model: svc.service.backend.info.model, build: String(build) })).toBe(1);
    expect(sample(m, "process_resident_memory_bytes")).toBeGreaterThan(0);
    // The local engine's model has a count of batch lines that gave way, none yet.
    expect(sample(m, "obi_sync_lane_preemptions", { model: svc.service.backend.info.model })).toBe(0);
    // Ids never become labels.
    expect(m).not.toMatch(/batch_[0-9a-f]{8}|file-[0-9a-f]{8}/);
  });

  it("counts an expired batch as a missed deadline", async () => {
    const lines = Array.from({ length: 60 }, (_, i) => chat(`x${i}`, `Story ${i}`, 256));
    const created = await submit(lines, "1s");
    const batch = await waitForBatch(svc.baseUrl, created.id);
    expect(batch.status).toBe("expired");
    const m = (await request(app()).get("/metrics")).text;
    expect(sample(m, "obi_batches_total", { status: "expired" })).toBe(1);
    expect(sample(m, "obi_sla_deadlines_total", { result: "missed" })).toBe(1);
    expect(sample(m, "obi_batch_requests_total", { endpoint: "/v1/chat/completions", outcome: "failed" })).toBeGreaterThan(1);
  });
});

describe("the interactive lane's preemptions", () => {
  let two: TestService;
  beforeAll(async () => {
    // Two sequences: none is kept free for the lane (that takes four), so a synchronous request finds both busy.
    two = await startTestService({ SEQUENCES: "2" });
  });
  afterAll(async () => two?.close());

  it("count the batch lines that gave their sequence to a synchronous request", async () => {
    const line = (i: number) =>
      JSON.stringify({
        custom_id: `long-${i}`,
        method: "POST",
        url: "/v1/completions",
        body: { prompt: `Once upon a time ${i}`, max_tokens: 300, temperature: 0, logit_bias: NEVER_ENDS },
      });
    const file = await request(two.service.app)
      .post("/v1/files")
      .field("purpose", "batch")
      .attach("file", Buffer.from(Array.from({ length: 8 }, (_, i) => line(i)).join("\n")), "in.jsonl");
    const created = await request(two.service.app)
      .post("/v1/batches")
      .send({ input_file_id: file.body.id, endpoint: "/v1/completions", completion_window: "24h" });
    const model = two.service.backend.info.model;
    const preemptions = async () => sample((await request(two.service.app).get("/metrics")).text, "obi_sync_lane_preemptions", { model });
    // Short synchronous requests while the batch runs: one that comes while both lines generate takes a sequence.
    let batch = created.body;
    while (!isFinal(batch) && !((await preemptions()) ?? 0)) {
      await request(two.service.app).post("/v1/completions").send({ model, prompt: "Hi", max_tokens: 2 }).expect(200);
      batch = (await request(two.service.app).get(`/v1/batches/${created.body.id}`)).body;
    }
    expect(await preemptions()).toBeGreaterThanOrEqual(1);
    const done = await pollBatch(two.baseUrl, created.body.id, isFinal, { timeoutMs: 120_000 });
    expect(done.request_counts).toEqual({ total: 8, completed: 8, failed: 0 });
  }, 180_000);
});

describe("metrics objects", () => {
  it("keep one registry per instance", async () => {
    const a = createMetrics({ defaultMetrics: false });
    const b = createMetrics({ defaultMetrics: false });
    a.trackProgress("/v1/completions", { completed: 0, failed: 0, usage: { promptTokens: 0, completionTokens: 0, cachedTokens: 0 } })({
      completed: 3,
      failed: 1,
      usage: { promptTokens: 30, completionTokens: 12, cachedTokens: 0 },
    });
    expect(sample(await a.registry.metrics(), "obi_completion_tokens_total", { endpoint: "/v1/completions" })).toBe(12);
    expect(sample(await b.registry.metrics(), "obi_completion_tokens_total", { endpoint: "/v1/completions" })).toBeUndefined();
  });

  it("count only what a resumed run adds to what was on disk", async () => {
    const m = createMetrics({ defaultMetrics: false });
    const usage = (c: number) => ({ promptTokens: c * 10, completionTokens: c * 4, cachedTokens: 0 });
    const track = m.trackProgress("/v1/completions", { completed: 5, failed: 0, usage: usage(5) });
    track({ completed: 6, failed: 0, usage: usage(6) });
    track({ completed: 7, failed: 0, usage: usage(7) });
    const text = await m.registry.metrics();
    expect(sample(text, "obi_batch_requests_total", { endpoint: "/v1/completions", outcome: "completed" })).toBe(2);
    expect(sample(text, "obi_prompt_tokens_total", { endpoint: "/v1/completions" })).toBe(20);
  });

  it("average tokens per second over a sliding window", () => {
    let t = 1_000_000;
    const w = new RateWindow(10, () => t);
    w.add(50);
    t += 1000;
    w.add(50);
    expect(w.rate()).toBe(10);
    t += 9_500;
    expect(w.rate()).toBe(5); // the first second slid out
    t += 60_000;
    expect(w.rate()).toBe(0);
  });
});
