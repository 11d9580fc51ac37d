// The distributed mode's batch lifecycle on real PostgreSQL and S3: deadlines, cancels reaching the workers within
// a second, a worker's SIGTERM handing its shards back at once, a model that cannot load, the queue's bound, and
// the schema migrated once by processes starting together.
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { testModelPath } from "../../testkit/model.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import {
  closeCluster,
  countCalls,
  downloadResults,
  type SharedState,
  startedAfter,
  startNode,
  startSharedState,
  type TestNode,
} from "../helpers/cluster.js";
import { pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { scratchDir } from "../helpers/scratch.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const scratch = scratchDir("obi-models");
const COMMON = { SHARD_SIZE: "20", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "30", CANCEL_GRACE_SECONDS: "0", COLLECT_INTERVAL_SECONDS: "1" };

describe.skipIf(!POSTGRES_BIN)("distributed batch lifecycle", () => {
  let shared: SharedState;
  let api: TestNode;
  const nodes: TestNode[] = [];
  /** Workers started by the running test: stopped after it whatever its outcome, so none claims the next test's work. */
  let testWorkers: TestNode[] = [];
  const node = async (env: Record<string, string>) => {
    const n = await startNode(shared, { ...COMMON, ...env });
    nodes.push(n);
    if (env.ROLE === "worker") testWorkers.push(n);
    return n;
  };
  async function submit(n: number, prefix: string, opts: { maxTokens?: number; window?: string; model?: string } = {}) {
    const file = await uploadJsonl(api.baseUrl, completionJsonl(n, { prefix, maxTokens: opts.maxTokens ?? 32, model: opts.model }));
    return openaiClient(api).batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: (opts.window ?? "24h") as "24h",
    });
  }

  beforeAll(async () => {
    shared = await startSharedState();
    // Two processes migrating one fresh database at once: one applies the schema, the other finds it applied.
    [api] = await Promise.all([node({ ROLE: "api", MAX_QUEUE_DEPTH: "3" }), node({ ROLE: "api" })]);
  }, 90_000);
  afterEach(async () => {
    for (const w of testWorkers) await w.close({ graceMs: 0 });
    testWorkers = [];
  }, 60_000);
  afterAll(() => closeCluster(nodes, shared), 60_000);

  it("applies each migration once", async () => {
    const c = new pg.Client(shared.pg.url);
    await c.connect();
    const { rows } = await c.query("SELECT version FROM schema_migrations");
    await c.end();
    expect(rows.map((r) => r.version).sort()).toEqual([
      "001_initial",
      "002_shard_usage",
      "003_leader_leases",
      "004_webhooks",
      "005_engine_seconds",
      "006_totals",
      "007_keys",
      "008_output_order",
      "009_worker_url",
      "010_worker_catalogue",
      "011_result_cache",
      "012_cached_lines",
      "013_result_cache_blobs",
      "014_batch_models",
    ]);
  });

  it("spreads a batch's shards over idle workers: a 2-shard batch runs on two of three workers, one shard each", async () => {
    const workers = await Promise.all(["f-w1", "f-w2", "f-w3"].map((id) => node({ ROLE: "worker", WORKER_ID: id, WORKER_CAPACITY: "2" })));
    const b = await submit(40, "fair", { maxTokens: 4 });
    const done = await waitForBatch(api.baseUrl, b.id, 60_000);
    expect(done.status).toBe("completed");
    const inspected = (await (await fetch(`${api.baseUrl}/console/api/batches/${b.id}`)).json()) as { shards: Array<{ worker: string }> };
    expect(inspected.shards).toHaveLength(2);
    expect(new Set(inspected.shards.map((s) => s.worker)).size).toBe(2);
    // Each worker that ran a shard ran its 20 requests; the third ran none.
    const ran = workers.map((w) => w.calls.bodies.filter((x) => x.includes("story fair ")).length).sort();
    expect(ran).toEqual([0, 20, 20]);
    // Each process labels its samples with its name.
    expect(await (await fetch(`${workers[0].baseUrl}/metrics`)).text()).toMatch(/^process_cpu_user_seconds_total\{process="f-w1"\} /m);
  });

  it("forgets a killed worker's row after WORKER_RETENTION_SECONDS; /pools never lists it", async () => {
    const c = new pg.Client(shared.pg.url);
    await c.connect();
    try {
      // A worker killed two days ago: its row was never unregistered.
      await c.query(
        "INSERT INTO workers (id, pool, capacity, models, last_seen) VALUES ('killed-w', 'dedicated', 2, '{}', now() - interval '2 days')",
      );
      const listed = async () => JSON.stringify(await (await fetch(`${api.baseUrl}/pools`)).json());
      expect(await listed()).not.toContain("killed-w");
      await expect
        .poll(async () => (await c.query("SELECT count(*)::int AS n FROM workers WHERE id = 'killed-w'")).rows[0].n, { timeout: 15_000 })
        .toBe(0);
    } finally {
      await c.end();
    }
  });

  it("a cancel stops the work on every worker within a second; each request is accounted for once", async () => {
    const workers = [await node({ ROLE: "worker", WORKER_ID: "l-w1" }), await node({ ROLE: "worker", WORKER_ID: "l-w2" })];
    const calls = workers.map((w) => w.calls);
    const n = 800;
    const b = await submit(n, "lc1", { maxTokens: 64 });
    await pollBatch(api.baseUrl, b.id, (x) => x.request_counts.completed > 20, 60_000);
    const cancelledAt = Date.now();
    await openaiClient(api).batches.cancel(b.id);
    const done = await waitForBatch(api.baseUrl, b.id, 60_000);
    expect(done.status).toBe("cancelled");
    expect(done.request_counts.completed + done.request_counts.failed).toBe(n);
    // The workers' engine time is the batch's, in their pool (dedicated by default).
    expect(done.engine_seconds.dedicated).toBeGreaterThan(0);
    expect(done.engine_seconds.spot).toBe(0);
    // No request started on any worker later than a second after the cancel.
    expect(calls.flatMap((c) => startedAfter(c, "story lc1 ", cancelledAt + 1_000))).toEqual([]);
    const { output, errors } = await downloadResults(api, done);
    expect([...output, ...errors].map((l) => l.custom_id).sort()).toEqual(customIds("lc1", n).sort());
    expect(errors.every((l) => l.error.code === "batch_cancelled")).toBe(true);
    for (const w of workers) await w.close();
  }, 120_000);

  it("a deadline expires the batch on its workers: finished lines kept, the rest batch_expired", async () => {
    const worker = await node({ ROLE: "worker", WORKER_ID: "l-exp", WORKER_CAPACITY: "1" });
    const calls = worker.calls;
    const n = 1500;
    const b = await submit(n, "lx1", { maxTokens: 64, window: "4s" });
    const done = await waitForBatch(api.baseUrl, b.id, 60_000);
    expect(done.status).toBe("expired");
    // The deadline reached the worker within a second of the maintenance tick that found it (ticks are 1 s apart): no
    // request started later. 4 s more are allowed for a machine loaded by the whole suite, where the stop's arrival
    // and a line's start lag by seconds (seen: a group of 8 lines started more than 2 s past the deadline). The error
    // lines of the rest and the finalizing follow, which on two busy cores can take seconds more, so expired_at is
    // only checked to lie past the deadline.
    expect(startedAfter(calls, "story lx1 ", done.deadline_at * 1000 + 2_000 + 4_000)).toEqual([]);
    expect(done.expired_at).toBeGreaterThanOrEqual(done.deadline_at);
    expect(done.deadline_met).toBe(false);
    const c = done.request_counts;
    expect(c.completed).toBeGreaterThan(0);
    expect(c.completed + c.failed).toBe(n);
    const { output, errors } = await downloadResults(api, done);
    expect(output.length).toBe(c.completed);
    expect(errors.filter((l) => l.error.code === "batch_expired").length).toBe(c.failed);
    expect([...output, ...errors].map((l) => l.custom_id).sort()).toEqual(customIds("lx1", n).sort());
    await worker.close();
  }, 90_000);

  it("SIGTERM hands a worker's shards back at once: another worker resumes them long before the lease would lapse", async () => {
    const first = await node({ ROLE: "worker", WORKER_ID: "l-term", WORKER_CAPACITY: "2" });
    const firstCalls = countCalls(first);
    const n = 400;
    const b = await submit(n, "lt1", { maxTokens: 48 });
    await pollBatch(api.baseUrl, b.id, (x) => x.request_counts.completed >= 20, 60_000);
    // Grace enough for the requests in flight to finish even on a loaded machine (with 500 ms, a few were cut off
    // under the full suite and, never written, ran again on the second worker: correct, but not what this checks).
    await first.close({ graceMs: 10_000 });
    const c = new pg.Client(shared.pg.url);
    await c.connect();
    const { rows } = await c.query("SELECT count(*)::int AS n FROM shards WHERE batch_id = $1 AND state = 'running'", [b.id]);
    await c.end();
    expect(rows[0].n).toBe(0);
    const handedBackAt = Date.now();
    const second = await node({ ROLE: "worker", WORKER_ID: "l-term-2" });
    const secondCalls = countCalls(second);
    const done = await waitForBatch(api.baseUrl, b.id, 90_000);
    expect(done.status).toBe("completed");
    // The second worker took the shards up at once, not when their 30 s lease would have lapsed (how long the
    // rest then takes depends on the machine's load, not on the hand-back).
    const resumedAt = second.calls.at[second.calls.bodies.findIndex((x) => x.includes("story lt1 "))];
    expect(resumedAt - handedBackAt).toBeLessThan(15_000);
    // Drained and checkpointed: nothing ran twice.
    const ran = (calls: string[]) => calls.filter((x) => x.includes("story lt1 ")).length;
    expect(ran(firstCalls) + ran(secondCalls)).toBe(n);
    await second.close();
  }, 120_000);

  it("a model that cannot load fails its batch with the reason; the queue's bound answers 429", async () => {
    const file = await scratch.write(
      [
        "default_model: good",
        "models:",
        `  - { name: good, local: { path: ${await testModelPath()} } }`,
        "  - { name: broken, local: { path: ./missing.gguf } }",
      ].join("\n"),
      "models.yaml",
    );
    const apiModels = await node({ ROLE: "api", MODELS_FILE: file, MODEL_PATH: "" });
    const worker = await node({ ROLE: "worker", WORKER_ID: "l-models", MODELS_FILE: file, MODEL_PATH: "" });
    const upload = await uploadJsonl(apiModels.baseUrl, completionJsonl(30, { prefix: "lb1", model: "broken" }));
    const b = await openaiClient(apiModels).batches.create({
      input_file_id: upload.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    const done = await waitForBatch(apiModels.baseUrl, b.id, 60_000);
    expect(done.status).toBe("failed");
    expect(done.errors?.data?.[0]?.message).toMatch(/could not be loaded/);
    expect(done.request_counts.completed + done.request_counts.failed).toBe(30);
    await worker.close();

    // No worker now: batches wait, and the fourth queued one is refused (MAX_QUEUE_DEPTH=3 on `api`).
    for (let i = 0; i < 3; i++) await submit(2, `lq${i}`);
    const res = await fetch(`${api.baseUrl}/v1/batches`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input_file_id: upload.id, endpoint: "/v1/completions", completion_window: "24h" }),
    });
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("30");
    expect(((await res.json()) as any).error.code).toBe("queue_full");
  }, 120_000);
});
