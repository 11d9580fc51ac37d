// The upstream backend against a real OpenAI-compatible server: llama.cpp's own llama-server, built from the
// source node-llama-cpp ships (scripts/build-llama-server.sh; .ci/run builds it once and caches it). Faults
// come from a proxy in front of it (tests/helpers/fault-proxy.ts). Skipped, with a note, where no build exists.
import { writeFileSync } from "node:fs";
import Anthropic from "@anthropic-ai/sdk";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { until } from "../../testkit/batch-client.js";
import { cachedLlamaServer, startLlamaServer } from "../../testkit/llama-server.js";
import { testModelPath } from "../../testkit/model.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import type { UpstreamStats } from "../../upstream/backend.js";
import { type FaultProxy, startFaultProxy } from "../helpers/fault-proxy.js";
import { accountIds, createBatch, getBatch, isFinal, pollBatch, resultLines, uploadJsonl } from "../helpers/http-batches.js";
import { scratchDir } from "../helpers/scratch.js";
import { startTestService, type TestService } from "../helpers/service.js";

const binary = cachedLlamaServer();
if (!binary)
  console.warn("tests/upstream/llama-server.sys.test.ts skipped: no llama-server build (bash scripts/build-llama-server.sh makes one)");

let upstream: Awaited<ReturnType<typeof startLlamaServer>>;
const services: TestService[] = [];
const scratch = scratchDir("obi-upstream");
const proxies: FaultProxy[] = [];

beforeAll(async () => {
  if (!binary) return;
  upstream = await startLlamaServer(binary, await testModelPath(), { parallel: 8, threads: 1, ctxPerSlot: 256 });
}, 120_000);
afterAll(async () => {
  for (const s of services.splice(0)) await s.close();
  for (const p of proxies.splice(0)) await p.close();
  await upstream?.stop();
});

/** A service whose models file holds `models` (YAML lines under `models:`). */
async function serviceWith(models: string[], env: Record<string, string> = {}): Promise<TestService> {
  const file = await scratch.write(["models:", ...models.map((m) => `  - ${m}`)].join("\n"), "models.yaml");
  const svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: file, ...env });
  services.push(svc);
  return svc;
}

const remote = (urls: string[], extra = "") =>
  `{ name: remote, upstream: { base_urls: [${urls.map((u) => `"${u}"`).join(", ")}], model: stories, max_in_flight: 16${extra} } }`;

async function runBatch(svc: TestService, jsonl: string, timeoutMs = 120_000) {
  const file = await uploadJsonl(svc.baseUrl, jsonl);
  const created = await createBatch(svc.baseUrl, file.id);
  expect(created.status).toBe(200);
  return pollBatch(svc.baseUrl, created.body.id, isFinal, timeoutMs);
}

const stats = (svc: TestService): UpstreamStats =>
  svc.service.models.backends().find((b) => b.name === "remote")!.backend.stats!() as UpstreamStats;

describe.skipIf(!binary)("upstream backend on a real llama-server", () => {
  it("runs a 500-request batch with every line exactly once, bodies as the upstream sent them", async () => {
    const svc = await serviceWith([remote([`${upstream.baseUrl}/v1`])]);
    const b = await runBatch(svc, completionJsonl(500, { prefix: "u", model: "remote", maxTokens: 4 }));
    expect(b).toMatchObject({ status: "completed", model: "remote", request_counts: { completed: 500, failed: 0, total: 500 } });
    expect(accountIds(svc.batchDir, b.id, customIds("u", 500))).toEqual({ duplicated: [], missing: [], lines: 500 });
    const lines = resultLines(svc.batchDir, b.id).output;
    let completion = 0;
    for (const l of lines) {
      expect(l.response.status_code).toBe(200);
      expect(l.response.body).toMatchObject({ object: "text_completion", model: "remote" });
      completion += l.response.body.usage.completion_tokens;
    }
    expect(b.usage.output_tokens).toBe(completion);
    expect(completion).toBeGreaterThan(0);
    const s = stats(svc);
    expect(s).toMatchObject({ requests: 500, retries: 0, inFlight: 0, errors: {} });
    // Fast, healthy answers: the limit grew past where it started (4).
    expect(s.limit).toBeGreaterThan(4);
    const metrics = await (await fetch(`${svc.baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/obi_backend_limit\{model="remote"\} \d+/);
    expect(metrics).toMatch(/obi_backend_requests\{model="remote"\} 500/);
  }, 180_000);

  it("loses and repeats nothing with 20% of requests answered 429 (with and without Retry-After), 503 or reset; the limit backs off and recovers", async () => {
    const proxy = await startFaultProxy({
      target: upstream.baseUrl,
      rate: 0.2,
      faults: ["429-retry-after", "429", "503", "reset"],
      seed: 7,
    });
    proxies.push(proxy);
    const svc = await serviceWith([remote([proxy.baseUrl], ", max_attempts: 12")]);
    const limits: number[] = [];
    const sampler = setInterval(() => {
      const b = svc.service.models.backends().find((x) => x.name === "remote");
      if (b) limits.push(b.backend.stats!().limit);
    }, 10);
    const b = await runBatch(svc, completionJsonl(300, { prefix: "f", model: "remote", maxTokens: 4 }));
    clearInterval(sampler);
    expect(b.request_counts).toEqual({ completed: 300, failed: 0, total: 300 });
    expect(accountIds(svc.batchDir, b.id, customIds("f", 300))).toEqual({ duplicated: [], missing: [], lines: 300 });
    for (const fault of ["429-retry-after", "429", "503", "reset"] as const) expect(proxy.counts[fault]).toBeGreaterThan(3);
    const s = stats(svc);
    expect(s.retries).toBe(proxy.counts["429-retry-after"] + proxy.counts["429"] + proxy.counts["503"] + proxy.counts.reset);
    expect(s.errors).toMatchObject({ "429": expect.any(Number), "503": expect.any(Number), connection: expect.any(Number) });
    expect(s.decreases.overload).toBeGreaterThan(0);
    // Backed off: some sample is below an earlier one; recovered: a later sample is above that low point.
    const low = limits.findIndex((l, i) => i > 0 && l < Math.max(...limits.slice(0, i)));
    expect(low).toBeGreaterThan(0);
    expect(Math.max(...limits.slice(low))).toBeGreaterThan(limits[low]);
  }, 180_000);

  it("retries answers slower than timeout_seconds, and spreads over base URLs around a dead one", async () => {
    const proxy = await startFaultProxy({ target: upstream.baseUrl, rate: 0.1, faults: ["slow"], slowMs: 2_500, seed: 3 });
    proxies.push(proxy);
    const dead = "http://127.0.0.1:9/v1";
    const svc = await serviceWith([remote([dead, proxy.baseUrl, `${upstream.baseUrl}/v1`], ", timeout_seconds: 1, max_attempts: 8")]);
    const b = await runBatch(svc, completionJsonl(120, { prefix: "t", model: "remote", maxTokens: 4 }));
    expect(b.request_counts).toEqual({ completed: 120, failed: 0, total: 120 });
    expect(accountIds(svc.batchDir, b.id, customIds("t", 120))).toEqual({ duplicated: [], missing: [], lines: 120 });
    const s = stats(svc);
    expect(proxy.counts.slow).toBeGreaterThan(0);
    expect(s.errors.timeout).toBeGreaterThan(0);
    const deadUrl = s.baseUrls.find((u) => u.url === "http://127.0.0.1:9/v1")!;
    expect(deadUrl.failures).toBeGreaterThan(0);
    // Cooled down after its first failures: nearly every request went to the live URLs.
    expect(deadUrl.failures).toBeLessThan(10);
  }, 180_000);

  it("waits what Retry-After says before trying again, and only the backoff's jitter without it", async () => {
    const timed = async (fault: "429-retry-after" | "429") => {
      const proxy = await startFaultProxy({ target: upstream.baseUrl, rate: 1, faults: [fault], retryAfter: "1.5", maxFaults: 1 });
      proxies.push(proxy);
      const svc = await serviceWith([remote([proxy.baseUrl])]);
      const b = await runBatch(svc, completionJsonl(1, { prefix: fault, model: "remote", maxTokens: 2 }));
      expect(b.request_counts).toEqual({ completed: 1, failed: 0, total: 1 });
      expect(stats(svc).retries).toBe(1);
      // The wait between the refused request and its retry, as the upstream saw them (not the batch's whole run).
      expect(proxy.posts).toHaveLength(2);
      return proxy.posts[1] - proxy.posts[0];
    };
    // 1.5 s as asked; without the header the first retry waits at most 250 ms (full jitter).
    expect(await timed("429-retry-after")).toBeGreaterThanOrEqual(1_500);
    expect(await timed("429")).toBeLessThan(1_500);
  }, 60_000);

  it("sends the key from the variable api_key_env names, and never shows it in a log or /ready", async () => {
    const key = "sk-test-6a1f0c2e9b7d4e3f";
    const guarded = await startLlamaServer(binary!, await testModelPath(), { parallel: 2, threads: 1, ctxPerSlot: 256 }, [
      "--api-key",
      key,
    ]);
    try {
      const logs: string[] = [];
      const logger = pino({ level: "debug" }, { write: (line: string) => logs.push(line) });
      const file = await scratch.file("models.yaml");
      const models = (env: string) =>
        `models:\n  - { name: remote, upstream: { base_urls: ["${guarded.baseUrl}/v1"], model: m, api_key_env: ${env}, max_attempts: 1 } }\n`;
      process.env.OBI_TEST_UPSTREAM_KEY = key;
      process.env.OBI_TEST_WRONG_KEY = "sk-wrong";
      try {
        writeFileSync(file, models("OBI_TEST_UPSTREAM_KEY"));
        const svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: file, LOG_LEVEL: "debug" }, { logger });
        services.push(svc);
        const b = await runBatch(svc, completionJsonl(3, { prefix: "k", model: "remote", maxTokens: 2 }));
        expect(b.request_counts).toEqual({ completed: 3, failed: 0, total: 3 });
        const ready = await (await fetch(`${svc.baseUrl}/ready`)).text();
        expect(ready).not.toContain(key);
        expect(logs.join("")).not.toContain(key);
        expect(logs.join("")).toMatch(/"api_key":"set"/);

        // A wrong key: llama-server's 401 is each line's own answer, passed through.
        writeFileSync(file, models("OBI_TEST_WRONG_KEY"));
        const wrong = await startTestService({ MODEL_PATH: "", MODELS_FILE: file }, { logger });
        services.push(wrong);
        const w = await runBatch(wrong, completionJsonl(2, { prefix: "w", model: "remote", maxTokens: 2 }));
        expect(w.request_counts).toEqual({ completed: 0, failed: 2, total: 2 });
        for (const l of resultLines(wrong.batchDir, w.id).errors) expect(l.response.status_code).toBe(401);
      } finally {
        delete process.env.OBI_TEST_UPSTREAM_KEY;
        delete process.env.OBI_TEST_WRONG_KEY;
      }
    } finally {
      await guarded.stop();
    }
  }, 120_000);

  it("gives a 4xx its own error line with the upstream's status and body, never retried", async () => {
    const svc = await serviceWith([remote([`${upstream.baseUrl}/v1`])]);
    const long = "Once upon a time there was a very long story. ".repeat(120);
    const jsonl = [
      JSON.stringify({ custom_id: "ok", method: "POST", url: "/v1/completions", body: { model: "remote", prompt: "Once", max_tokens: 3 } }),
      JSON.stringify({
        custom_id: "too-long",
        method: "POST",
        url: "/v1/completions",
        body: { model: "remote", prompt: long, max_tokens: 3 },
      }),
    ].join("\n");
    // Token ids are the upstream's to judge: llama-server refuses one past its vocabulary.
    const badToken = JSON.stringify({
      custom_id: "bad-token",
      method: "POST",
      url: "/v1/completions",
      body: { model: "remote", prompt: [999_999], max_tokens: 3 },
    });
    const b = await runBatch(svc, `${jsonl}\n${badToken}\n`);
    expect(b.request_counts).toEqual({ completed: 1, failed: 2, total: 3 });
    const errors = new Map(resultLines(svc.batchDir, b.id).errors.map((l: any) => [l.custom_id, l.response]));
    // llama-server's own error body, untouched.
    expect(errors.get("bad-token")).toMatchObject({
      status_code: 400,
      body: { error: { code: 400, type: "invalid_request_error", message: "Prompt contains invalid tokens" } },
    });
    // A prompt past the slot's context, refused in OpenAI's words and shape (llama-server says exceed_context_size_error).
    expect(errors.get("too-long")?.status_code).toBe(400);
    expect(errors.get("too-long")?.body.error).toMatchObject({
      type: "invalid_request_error",
      code: "context_length_exceeded",
      param: "prompt",
    });
    expect(errors.get("too-long")?.body.error.message).toMatch(/maximum context length is 256 tokens/);
    expect(stats(svc).retries).toBe(0);
  }, 60_000);

  it("refuses a max_tokens past the upstream's context on that line, naming the field, as the local engine does", async () => {
    const svc = await serviceWith([remote([`${upstream.baseUrl}/v1`])]);
    const chat = (body: object) => ({ model: "remote", messages: [{ role: "user", content: "Once" }], ...body });
    const lines: Array<[string, string, object]> = [
      ["fits", "/v1/completions", { model: "remote", prompt: "Once", max_tokens: 8 }],
      // At temperature 0 this line's answer is the same every run: on either test model it runs to the context.
      ["completions", "/v1/completions", { model: "remote", prompt: "Once", max_tokens: 100_000, temperature: 0 }],
      ["chat", "/v1/chat/completions", chat({ max_completion_tokens: 100_000 })],
      ["chat-fits", "/v1/chat/completions", chat({ max_tokens: 8 })],
      ["responses", "/v1/responses", { model: "remote", input: "Once", max_output_tokens: 100_000 }],
      ["messages", "/v1/messages", { model: "remote", max_tokens: 100_000, messages: [{ role: "user", content: "Once" }] }],
    ];
    const refused = new Map<string, any>();
    for (const [id, url, body] of lines) {
      const file = await uploadJsonl(svc.baseUrl, `${JSON.stringify({ custom_id: id, method: "POST", url, body })}\n`);
      const res = await fetch(`${svc.baseUrl}/v1/batches`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ input_file_id: file.id, endpoint: url, completion_window: "24h" }),
      });
      const b = await pollBatch(svc.baseUrl, ((await res.json()) as { id: string }).id, isFinal, 60_000);
      const out = resultLines(svc.batchDir, b.id);
      if (id.includes("fits")) expect(out.output.map((l: any) => l.response.status_code)).toEqual([200]);
      else refused.set(id, out.errors[0]?.response ?? { line: out.errors[0] ?? out.output[0] });
    }
    // llama-server does not refuse such a line: it answers up to its context, and the service tells that apart by
    // the answer stopping there. A model that ends its answer first (the generated one's random weights can sample
    // the end token) leaves nothing to tell: that line is answered, and said so here, not judged.
    for (const [id, r] of [...refused])
      if (r.line?.response?.status_code === 200) {
        console.warn(`llama-server.test: the ${id} line ended before the upstream's context: not judged`);
        refused.delete(id);
      }
    const judged = (id: string, param: string) => {
      if (refused.has(id))
        expect(refused.get(id).body?.error, JSON.stringify(refused.get(id))).toMatchObject({ code: "context_length_exceeded", param });
    };
    expect(refused.has("completions")).toBe(true);
    judged("completions", "max_tokens");
    expect(refused.get("completions").body.error.message).toMatch(/maximum context length is 256 tokens.*100000 in max_tokens/);
    judged("chat", "max_completion_tokens");
    judged("responses", "max_output_tokens");
    if (refused.has("messages")) expect(JSON.stringify(refused.get("messages").body)).toMatch(/max_tokens/);
    for (const r of refused.values()) expect(r.status_code).toBe(400);
  }, 120_000);

  it("runs two local models and one upstream model in three concurrent batches, each line served by the model its batch named", async () => {
    const svc = await serviceWith([
      `{ name: first, local: { path: ${await testModelPath()}, sequences: 2 } }`,
      `{ name: second, local: { path: ${await ensureGeneratedModel()}, sequences: 2, context_size: 256 } }`,
      remote([`${upstream.baseUrl}/v1`]),
    ]);
    const ids = await Promise.all(
      ["first", "second", "remote"].map(async (model) => {
        const file = await uploadJsonl(svc.baseUrl, completionJsonl(12, { prefix: model, model, maxTokens: 6 }));
        return (await createBatch(svc.baseUrl, file.id)).body.id as string;
      }),
    );
    // All three run at the same time.
    const running = await Promise.all(ids.map((id) => pollBatch(svc.baseUrl, id, (x) => x.status !== "validating", 60_000)));
    expect(running.every((x) => x.status !== "failed")).toBe(true);
    const done = await Promise.all(ids.map((id) => pollBatch(svc.baseUrl, id, isFinal, 120_000)));
    for (const [i, model] of ["first", "second", "remote"].entries()) {
      expect(done[i]).toMatchObject({ status: "completed", model, request_counts: { completed: 12, failed: 0, total: 12 } });
      const lines = resultLines(svc.batchDir, ids[i]).output;
      expect(lines.map((l) => l.custom_id).sort()).toEqual(customIds(model, 12).sort());
      for (const l of lines) expect(l.response.body.model).toBe(model);
    }
    // The upstream batch held no simulated GPU slot; the local ones did.
    expect(done[2].pool).toBeNull();
    expect(done[0].pool).not.toBeNull();
  }, 180_000);

  it("paused, sends only what it had sent: the lines waiting for the upstream's room go back unrun, and run once on resume", async () => {
    // Two requests at the upstream at once, 40 lines in flight: nearly all of them wait for room.
    const two = `{ name: remote, upstream: { base_urls: ["${upstream.baseUrl}/v1"], model: stories, min_in_flight: 2, max_in_flight: 2 } }`;
    const svc = await serviceWith([two], {
      PIPELINE_CONCURRENCY: "40",
    });
    const b = await runUntil(svc, completionJsonl(120, { prefix: "up", model: "remote", maxTokens: 64 }));
    const post = (action: string) => fetch(`${svc.baseUrl}/v1/batches/${b}/${action}`, { method: "POST" });
    await post("pause");
    // Counted once the pause has landed: what was sent by then, at most the upstream's room more (a line given room
    // in the same moment). The batch's completed count is no measure of it: it counts lines as their file is synced.
    const sent = stats(svc).requests;
    // The requests sent finish; once the upstream is idle and their lines committed, nothing more is sent.
    await until("the upstream idle", async () => (stats(svc).inFlight === 0 ? true : undefined), { timeoutMs: 60_000 });
    await new Promise((r) => setTimeout(r, 2_000));
    expect(stats(svc).requests - sent).toBeLessThanOrEqual(2);
    expect((await getBatch(svc.baseUrl, b)).request_counts.completed).toBeLessThan(120);
    expect(stats(svc).inFlight).toBe(0);
    await post("resume");
    const done = await pollBatch(svc.baseUrl, b, isFinal, 120_000);
    expect(done.request_counts).toEqual({ completed: 120, failed: 0, total: 120 });
    expect(accountIds(svc.batchDir, b, customIds("up", 120))).toEqual({ duplicated: [], missing: [], lines: 120 });
  }, 180_000);
});

/** Creates the batch and waits for its first completed line; its id. */
async function runUntil(svc: TestService, jsonl: string): Promise<string> {
  const file = await uploadJsonl(svc.baseUrl, jsonl);
  const id = (await createBatch(svc.baseUrl, file.id)).body.id as string;
  await pollBatch(svc.baseUrl, id, (x) => x.request_counts.completed >= 1, 60_000);
  return id;
}

describe.skipIf(!binary)("Anthropic's message batches over a real llama-server", () => {
  it("sends top_k through (top_k 1 answers as greedy decoding does) and brings the upstream's refusals back per request", async () => {
    const svc = await serviceWith([remote([`${upstream.baseUrl}/v1`])]);
    const client = new Anthropic({ apiKey: "unused", baseURL: svc.baseUrl, maxRetries: 0 });
    const ask = (p: object) => ({
      model: "remote",
      max_tokens: 16,
      messages: [{ role: "user" as const, content: "Once upon a time" }],
      ...p,
    });
    const created = await client.messages.batches.create({
      requests: [
        { custom_id: "greedy", params: ask({ temperature: 0 }) },
        { custom_id: "top1", params: ask({ temperature: 1, top_k: 1 }) },
        { custom_id: "long", params: ask({ messages: [{ role: "user", content: "tell me more ".repeat(400) }] }) },
      ],
    });
    let batch = created;
    while (batch.processing_status !== "ended") {
      await new Promise((r) => setTimeout(r, 100));
      batch = await client.messages.batches.retrieve(created.id);
    }
    const got = new Map<string, any>();
    for await (const line of await client.messages.batches.results(created.id)) got.set(line.custom_id, line.result);
    expect(batch.request_counts).toMatchObject({ succeeded: 2, errored: 1 });
    const text = (id: string) => got.get(id).message.content[0].text;
    expect(got.get("greedy").message).toMatchObject({ type: "message", model: "remote" });
    expect(text("top1")).toBe(text("greedy"));
    expect(got.get("long").error).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    expect(got.get("long").error.error.message).toMatch(/context/i);
  }, 120_000);

  it("passes echo with logprobs on to the upstream, and refuses an answer that ignored it, naming echo", async () => {
    const svc = await serviceWith([remote([`${upstream.baseUrl}/v1`])]);
    const score = (body: object) =>
      fetch(`${svc.baseUrl}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "remote", ...body }),
      });
    // llama-server generates without echoing (a harness would score its token as the prompt's): refused.
    for (const prompt of ["Once upon a time", [[1, 300, 301]]]) {
      const res = await score({ prompt, max_tokens: 1, echo: true, logprobs: 1 });
      expect(res.status).toBe(400);
      expect((await res.json()).error).toMatchObject({
        code: "unsupported_value",
        param: "echo",
        message: expect.stringMatching(/ignored 'echo'/),
      });
    }
    // What it does serve passes as before.
    const plain = await score({ prompt: "Once upon a time", max_tokens: 1, logprobs: 1 });
    expect(plain.status).toBe(200);
    expect(stats(svc).requests).toBe(3);
  }, 60_000);
});
