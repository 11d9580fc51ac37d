// Stop rules on real runs, in both modes: a batch whose lines fail past its metadata's max_error_rate, or whose
// output passes max_output_tokens, ends `failed` early with the rule and the figures in its errors; what it
// completed stays downloadable, what it never ran is marked so (every custom_id once), and retry runs those lines.
// The error rate weighs lines refused before they run (which end at once) by the lines looked at, so a batch with
// a few refusals is not stopped before its other lines have run. Bad limits are refused at create, naming the
// metadata key.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl, customIds, jsonl } from "../../testkit/workload.js";
import { apiAndWorker, downloadResults } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, startTestService, type TestService, waitForBatch } from "../helpers/service.js";

const LINES = 1000;
/** The distributed mode's settings: four shards, checkpoints every second. */
const COMMON = { SHARD_SIZE: "250", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4" };

/** `n` lines; every other one asks for `suffix`, which the engine refuses per line (400 unsupported_parameter). */
function halfFailing(prefix: string, n = LINES): string {
  return completionJsonl(n, { prefix, maxTokens: 48 })
    .trimEnd()
    .split("\n")
    .map((l, i) => (i % 2 === 1 ? l.replace('"max_tokens"', '"suffix":"!","max_tokens"') : l))
    .join("\n")
    .concat("\n");
}

async function create(baseUrl: string, text: string, metadata: Record<string, string>, endpoint = "/v1/completions") {
  const file = await uploadJsonl(baseUrl, text);
  return fetch(`${baseUrl}/v1/batches`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input_file_id: file.id, endpoint, completion_window: "24h", metadata }),
  });
}

/** 200 chat lines, every 8th with a prompt too long for the context (refused before it runs): 12.5% fail. */
function everyEighthTooLong(): string {
  const long = "Once upon a time there was a big dog. ".repeat(200);
  return jsonl(
    Array.from({ length: 200 }, (_, i) => ({
      custom_id: `chat-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: "m", messages: [{ role: "user", content: i % 8 === 7 ? long : `Tell me story ${i}.` }], max_tokens: 16 },
    })),
  );
}

async function stoppedByErrorRate(node: { baseUrl: string }, prefix: string) {
  const res = await create(node.baseUrl, halfFailing(prefix), { max_error_rate: "0.2", team: "evals" });
  expect(res.status).toBe(200);
  const created = await res.json();
  const done = await waitForBatch(node.baseUrl, created.id, 120_000);
  expect(done.status).toBe("failed");
  const stop = done.errors.data.find((e: any) => e.code === "stop_rule");
  // Every other line asks for what the engine refuses before it runs: refused as the lines come, half of them.
  expect(stop.message).toMatch(
    /^stopped: \d+(\.\d)?% of lines fail \(\d+ of \d+ that ran failed; \d+ of \d+ were refused before they ran\), over max_error_rate 20%$/,
  );
  expect(stop.param).toBe("metadata.max_error_rate");
  // OpenAI's client reads the stopped batch as any failed one.
  expect((await openaiClient(node).batches.retrieve(created.id)).status).toBe("failed");
  const { output, errors, ids } = await downloadResults(node, done);
  expect(ids).toEqual([...customIds(prefix, LINES)].sort());
  expect(done.request_counts).toEqual({ total: LINES, completed: output.length, failed: errors.length });
  const notRun = errors.filter((e) => e.error?.code === "batch_failed" || e.response?.body?.error?.code === "batch_failed");
  // It stopped early: most lines never ran, and say so.
  expect(notRun.length).toBeGreaterThan(LINES / 2);
  expect(output.length).toBeLessThan(LINES / 4);
  return { done, notRun };
}

describe("stop rules (embedded mode)", () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ SEQUENCES: "2" });
  }, 120_000);
  afterAll(() => svc?.close());

  it("refuses limits that are not limits, naming the metadata key", async () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ max_error_rate: "abc" }, "metadata.max_error_rate"],
      [{ max_error_rate: "1.5" }, "metadata.max_error_rate"],
      [{ max_output_tokens: "2.5" }, "metadata.max_output_tokens"],
      [{ max_cost: "-1" }, "metadata.max_cost"],
      // The model has no price in the models file: a cost limit could not be kept.
      [{ max_cost: "1" }, "metadata.max_cost"],
    ];
    for (const [metadata, param] of cases) {
      const res = await create(svc.baseUrl, completionJsonl(2, { prefix: "bad" }), metadata);
      const body = await res.json();
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(body.error).toMatchObject({ type: "invalid_request_error", param });
      expect(body.error.message).toContain(param);
    }
  });

  it("ends a batch failed past max_error_rate, keeps what completed, marks what never ran, and retry runs it", async () => {
    const { done, notRun } = await stoppedByErrorRate(svc, "er");
    const metrics = await (await fetch(`${svc.baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/batch_stops_total\{rule="max_error_rate"\} 1/);
    const retry = await fetch(`${svc.baseUrl}/v1/batches/${done.id}/retry`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ codes: ["batch_failed"] }),
    });
    expect(retry.status).toBe(200);
    const again = await waitForBatch(svc.baseUrl, (await retry.json()).id, 120_000);
    expect(again.request_counts.total).toBe(notRun.length);
  }, 240_000);

  it("lets a batch with 12.5% of its lines refused at once run its other lines, and complete under max_error_rate", async () => {
    const res = await create(svc.baseUrl, everyEighthTooLong(), { max_error_rate: "0.2" }, "/v1/chat/completions");
    expect(res.status).toBe(200);
    const done = await waitForBatch(svc.baseUrl, (await res.json()).id, 120_000);
    expect(done.errors).toBeNull();
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ total: 200, completed: 175, failed: 25 });
    const { errors, ids } = await downloadResults(svc, done);
    for (const e of errors) expect(e.response.body.error.code).toBe("context_length_exceeded");
    expect(ids).toEqual(customIds("chat", 200).sort());
  }, 240_000);

  it("ends a batch failed past max_output_tokens, with the figures", async () => {
    const res = await create(svc.baseUrl, completionJsonl(400, { prefix: "tok", maxTokens: 48 }), { max_output_tokens: "100" });
    const done = await waitForBatch(svc.baseUrl, (await res.json()).id, 120_000);
    expect(done.status).toBe("failed");
    const stop = done.errors.data.find((e: any) => e.code === "stop_rule");
    expect(stop.message).toMatch(/^stopped: [\d,]+ output tokens, over max_output_tokens 100$/);
    expect(done.usage.output_tokens).toBeGreaterThan(100);
    expect(done.request_counts.completed).toBeLessThan(200);
  }, 240_000);
});

describe("stop rules (distributed mode)", () => {
  const nodes = apiAndWorker("memory", COMMON, "w1");

  it("the worker stops the batch, the API server reports it, every custom_id once", async () => {
    await stoppedByErrorRate(nodes.api, "dist");
  }, 240_000);
});

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

describe.skipIf(!POSTGRES_BIN)("stop rules (distributed mode on PostgreSQL and S3)", () => {
  const nodes = apiAndWorker("postgres", COMMON, "pg-stop");

  it("the worker stops the batch through the database, every custom_id once", async () => {
    await stoppedByErrorRate(nodes.api, "pgstop");
  }, 240_000);
});
