// What dies when, in the distributed mode, on real components: kill -9 of an API server that also held the
// maintenance lock, kill -9 of a worker mid-shard, kill -9 of a worker while its batch is paused, PostgreSQL restarted mid-batch, the S3 server unreachable for
// 10 s, and a spot reclaim. Every batch ends with each custom_id exactly once and completed + failed == total; where
// a worker dies, no line it had checkpointed runs again (engine calls counted on the survivor).
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import {
  countCalls,
  downloadResults,
  type SharedState,
  startChild,
  startNode,
  startSharedState,
  type TestNode,
} from "../helpers/cluster.js";
import { pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { metricSample } from "../helpers/metric-sample.js";
import type { ServerProcess } from "../helpers/process.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const COMMON = { SHARD_SIZE: "40", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4", THREADS: "1", SEQUENCES: "4", CONTEXT_SIZE: "512" };

describe.skipIf(!POSTGRES_BIN)("distributed mode under failures", () => {
  let shared: SharedState;
  let api: TestNode;
  let first: ServerProcess;
  const children: ServerProcess[] = [];

  async function child(env: Record<string, string>): Promise<ServerProcess> {
    const p = await startChild(shared, { ...COMMON, ...env });
    children.push(p);
    return p;
  }
  /** Workers started by the running test: stopped after it whatever its outcome, so none runs the next test's work. */
  let testWorkers: TestNode[] = [];
  async function worker(env: Record<string, string>): Promise<TestNode> {
    const n = await startNode(shared, { ...COMMON, ROLE: "worker", ...env });
    testWorkers.push(n);
    return n;
  }
  async function kill9(p: ServerProcess) {
    p.child.kill("SIGKILL");
    await p.exited;
  }
  async function submit(base: string, n: number, prefix: string, maxTokens = 32) {
    const file = await uploadJsonl(base, completionJsonl(n, { prefix, maxTokens }));
    return openaiClient({ baseUrl: base }).batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
  }
  /** Every custom_id of the batch's output and error files, and its counts. */
  async function account(id: string) {
    const b = await waitForBatch(api.baseUrl, id, 150_000);
    return { batch: b, ids: (await downloadResults(api, b)).ids };
  }
  async function committedLines(batchId: string): Promise<number> {
    const c = new pg.Client(shared.pg.url);
    await c.connect();
    const { rows } = await c.query("SELECT coalesce(sum(completed + failed), 0)::int AS n FROM shards WHERE batch_id = $1", [batchId]);
    await c.end();
    return rows[0].n;
  }
  /** Whether one of the batch's shards is running on the worker now (claimed, not done). */
  async function runningOn(batchId: string, workerId: string): Promise<boolean> {
    const c = new pg.Client(shared.pg.url);
    await c.connect();
    const { rows } = await c.query("SELECT count(*)::int AS n FROM shards WHERE batch_id = $1 AND state = 'running' AND worker_id = $2", [
      batchId,
      workerId,
    ]);
    await c.end();
    return rows[0].n > 0;
  }
  const ran = (calls: string[], prefix: string) => calls.filter((b) => b.includes(`story ${prefix} `)).length;

  beforeAll(async () => {
    shared = await startSharedState();
    // Started first, so it holds the maintenance lock when it is killed.
    first = await child({ ROLE: "api" });
    for (let i = 0; i < 200 && !/now runs the maintenance/.test(first.output()); i++) await new Promise((r) => setTimeout(r, 50));
    api = await startNode(shared, { ...COMMON, ROLE: "api" });
  }, 90_000);

  afterEach(async () => {
    for (const w of testWorkers) await w.close({ graceMs: 0 });
    testWorkers = [];
  }, 60_000);

  afterAll(async () => {
    for (const p of children) if (p.child.exitCode === null) p.child.kill("SIGKILL");
    await api?.close();
    await shared?.close();
  }, 60_000);

  it("kill -9 of the API server that runs the maintenance: the batch still finishes, seen from another API server", async () => {
    const w = await worker({ WORKER_ID: "w-a" });
    const calls = countCalls(w);
    expect(first.output()).toMatch(/now runs the maintenance/);
    const b = await submit(first.baseUrl, 160, "k1");
    await pollBatch(api.baseUrl, b.id, (x) => x.request_counts.completed > 0, 60_000);
    await kill9(first);
    const { batch, ids } = await account(b.id);
    expect(batch.status).toBe("completed");
    expect(ids).toEqual(customIds("k1", 160).sort());
    expect(ran(calls, "k1")).toBe(160);
    // The totals live in the database: whichever process took the lease over (the other API server or the
    // worker) exports them, the killed one's counts included, and it alone (a sum over processes counts once).
    const texts = await Promise.all([api, w].map(async (n) => (await fetch(`${n.baseUrl}/metrics`)).text()));
    const leaders = texts.filter((t) => /^obi_batches_total\{/m.test(t));
    expect(leaders).toHaveLength(1);
    expect(metricSample(leaders[0], "obi_batches_total", 'status="completed"')).toBeGreaterThanOrEqual(1);
    expect(metricSample(leaders[0], "obi_requests_total", 'outcome="completed"')).toBeGreaterThanOrEqual(160);
  }, 180_000);

  it("pause, kill -9 of the worker, resume: the paused batch stays put, then another worker finishes it, each line once", async () => {
    const victim = await child({ ROLE: "worker", WORKER_ID: "paused-victim", WORKER_CAPACITY: "2", SHUTDOWN_GRACE_SECONDS: "20" });
    const b = await submit(api.baseUrl, 240, "kp");
    await pollBatch(api.baseUrl, b.id, (x) => x.request_counts.completed >= 30, 90_000);
    const paused = await (await fetch(`${api.baseUrl}/v1/batches/${b.id}/pause`, { method: "POST" })).json();
    expect(paused.paused_at).toBeGreaterThan(0);
    // The worker hands its shards back once what it had in flight is committed: nothing runs while paused.
    for (let i = 0; i < 300 && (await runningOn(b.id, "paused-victim")); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await runningOn(b.id, "paused-victim")).toBe(false);
    await kill9(victim);
    const held = await committedLines(b.id);
    const survivor = await worker({ WORKER_ID: "paused-survivor" });
    const calls = countCalls(survivor);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await committedLines(b.id)).toBe(held);
    expect(ran(calls, "kp")).toBe(0);
    await fetch(`${api.baseUrl}/v1/batches/${b.id}/resume`, { method: "POST" });
    const { batch, ids } = await account(b.id);
    expect(batch.status).toBe("completed");
    expect(batch.request_counts).toEqual({ completed: 240, failed: 0, total: 240 });
    expect(ids).toEqual(customIds("kp", 240).sort());
    // The survivor ran what was not committed before the pause, and nothing twice.
    expect(ran(calls, "kp")).toBe(240 - held);
  }, 240_000);

  it("kill -9 of a worker mid-shard: another takes its shards after the lease and reruns nothing it checkpointed", async () => {
    const victim = await child({ ROLE: "worker", WORKER_ID: "victim", WORKER_CAPACITY: "2" });
    const b = await submit(api.baseUrl, 240, "k2");
    await pollBatch(api.baseUrl, b.id, (x) => x.request_counts.completed >= 50, 90_000);
    await kill9(victim);
    const checkpointed = await committedLines(b.id);
    expect(checkpointed).toBeGreaterThanOrEqual(50);
    const survivor = await worker({ WORKER_ID: "survivor" });
    const calls = countCalls(survivor);
    const { batch, ids } = await account(b.id);
    expect(batch.status).toBe("completed");
    expect(batch.request_counts).toEqual({ completed: 240, failed: 0, total: 240 });
    expect(ids).toEqual(customIds("k2", 240).sort());
    // The survivor ran exactly what had no checkpoint: nothing twice, nothing skipped.
    expect(ran(calls, "k2")).toBe(240 - checkpointed);
  }, 240_000);

  it("PostgreSQL restarted and the S3 server unreachable for 10 s mid-batch: each request once", async () => {
    await worker({ WORKER_ID: "w-outages" });
    // Long enough that three quarters of it still run when the S3 server goes (6 s alone, more on a loaded machine).
    const n = 800;
    const b = await submit(api.baseUrl, n, "k3", 32);
    await pollBatch(api.baseUrl, b.id, (x) => x.request_counts.completed > 0, 60_000);
    shared.pg.stop();
    await new Promise((r) => setTimeout(r, 2_000));
    shared.pg.start();
    const before = await pollBatch(api.baseUrl, b.id, (x) => x.request_counts.completed > n / 4 || x.status === "completed", 90_000);
    expect(before.status).toBe("in_progress");
    await shared.stopS3();
    await new Promise((r) => setTimeout(r, 10_000));
    await shared.startS3();
    const { batch, ids } = await account(b.id);
    expect(batch.status).toBe("completed");
    expect(batch.request_counts).toEqual({ completed: n, failed: 0, total: n });
    expect(ids).toEqual(customIds("k3", n).sort());
    // Both outages were met mid-run (and waited out), not slept through after the end.
    expect(batch.completed_at).toBeGreaterThan(before.in_progress_at + 10);
  }, 240_000);

  it("a spot reclaim moves the spot worker's shards to dedicated, resumed from their checkpoints", async () => {
    const spot = await worker({ WORKER_ID: "w-spot", WORKER_POOL: "spot", SPOT_PREEMPT_COOLDOWN_SECONDS: "60" });
    const dedicated = await worker({ WORKER_ID: "w-ded", WORKER_POOL: "dedicated", WORKER_CAPACITY: "1" });
    const calls = [countCalls(spot), countCalls(dedicated)];
    const b = await submit(api.baseUrl, 240, "k4");
    await pollBatch(api.baseUrl, b.id, (x) => x.request_counts.completed >= 40, 60_000);
    // Reclaimed while the spot worker holds a shard (between two of its shards it holds none, and there is nothing to move).
    for (let i = 0; i < 400 && !(await runningOn(b.id, "w-spot")); i++) await new Promise((r) => setTimeout(r, 10));
    const res = await fetch(`${api.baseUrl}/pools/spot/preempt`, { method: "POST" });
    const body = (await res.json()) as any;
    expect(body.preempted).toContain(b.id);
    const { batch, ids } = await account(b.id);
    expect(batch.status).toBe("completed");
    expect(ids).toEqual(customIds("k4", 240).sort());
    // Drained, not killed: what the spot worker ran was checkpointed, so nothing ran twice.
    expect(ran(calls[0], "k4") + ran(calls[1], "k4")).toBe(240);
    expect(ran(calls[1], "k4")).toBeGreaterThan(0);
    const pools = (await (await fetch(`${api.baseUrl}/pools`)).json()) as any;
    const spotPool = pools.pools.find((p: any) => p.name === "spot");
    expect(spotPool.preemptions).toBe(1);
    expect(spotPool.workers.map((w: any) => w.id)).toEqual(["w-spot"]);
  }, 240_000);
});
