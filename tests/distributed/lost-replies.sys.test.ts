// Faults where the database meets the blob store, through real processes: a worker behind a TCP proxy to PostgreSQL
// whose checkpoint commit lands but whose reply is lost, with and without a partition long enough for another
// worker to take the shard over. Every batch is judged by the checker (chaos/checker.ts): each custom_id once, the
// counts and usage equal to the files.
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { checkBatch, describeVerdict } from "../../chaos/checker.js";
import { startTcpProxy, type TcpProxy, throughProxy } from "../../chaos/tcp-proxy.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import {
  closeCluster,
  downloadResults,
  type SharedState,
  startChild,
  startNode,
  startSharedState,
  type TestNode,
} from "../helpers/cluster.js";
import { pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import type { ServerProcess } from "../helpers/process.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const COMMON = { SHARD_SIZE: "100000", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4", THREADS: "1", SEQUENCES: "4", CONTEXT_SIZE: "512" };
/** Text only the checkpoint commit's statement sends (postgres/shards.ts). */
const COMMIT_SQL = "checkpoints = checkpoints + 1";

describe.skipIf(!POSTGRES_BIN)("distributed mode: a checkpoint commit whose reply is lost", () => {
  let shared: SharedState;
  let api: TestNode;
  let cleanup: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    shared = await startSharedState();
    api = await startNode(shared, { ...COMMON, ROLE: "api" });
  }, 90_000);
  afterEach(async () => {
    for (const c of cleanup.reverse()) await c().catch(() => undefined);
    cleanup = [];
  }, 60_000);
  afterAll(async () => {
    await api?.close();
    await shared?.close();
  }, 60_000);

  async function proxiedWorker(id: string): Promise<{ proxy: TcpProxy; worker: ServerProcess }> {
    const proxy = await startTcpProxy({ host: "127.0.0.1", port: shared.pg.port });
    const worker = await startChild(shared, {
      ...COMMON,
      ROLE: "worker",
      WORKER_ID: id,
      DATABASE_URL: throughProxy(shared.env.DATABASE_URL, proxy),
    });
    cleanup.push(async () => {
      worker.child.kill("SIGKILL");
      await worker.exited;
      await proxy.close();
    });
    return { proxy, worker };
  }
  async function submit(n: number, prefix: string) {
    const file = await uploadJsonl(api.baseUrl, completionJsonl(n, { prefix, maxTokens: 24 }));
    return openaiClient(api).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
  }
  async function verdict(id: string, prefix: string, n: number) {
    const b = await waitForBatch(api.baseUrl, id, 150_000);
    const { output, errors } = await downloadResults(api, b);
    return { batch: b, v: checkBatch(b as any, customIds(prefix, n), output, errors) };
  }

  it("the commit is retried as it was: counts and usage equal the files (the milder case: no partition)", async () => {
    const { proxy } = await proxiedWorker("lost-reply");
    const dropped = proxy.dropReplyTo(COMMIT_SQL, 0);
    const b = await submit(300, "lr");
    await dropped;
    const { batch, v } = await verdict(b.id, "lr", 300);
    expect(batch.status).toBe("completed");
    expect(v, describeVerdict(v)).toEqual({ batch: b.id, lost: 0, duplicated: 0, mismatches: [] });
  }, 200_000);

  it.each(["refuse", "silent"] as const)(
    "lost reply, then a %s partition past the lease: the successor reads only what was committed, nothing twice",
    async (mode) => {
      const prefix = `lp${mode[0]}`;
      const { proxy } = await proxiedWorker(`partitioned-${mode}`);
      const dropped = proxy.dropReplyTo(COMMIT_SQL, 15_000, mode);
      const b = await submit(350, prefix);
      await dropped;
      // Another worker, on the database directly, takes the shard over once the lease lapses.
      const successor = await startNode(shared, { ...COMMON, ROLE: "worker", WORKER_ID: "successor" });
      cleanup.push(() => successor.close({ graceMs: 0 }));
      const { batch, v } = await verdict(b.id, prefix, 350);
      expect(batch.status).toBe("completed");
      expect(v, describeVerdict(v)).toEqual({ batch: b.id, lost: 0, duplicated: 0, mismatches: [] });
      expect(successor.calls.bodies.filter((x) => x.includes(`story ${prefix} `)).length).toBeGreaterThan(0);
    },
    200_000,
  );
});

describe.skipIf(!POSTGRES_BIN)("distributed mode: a database outage longer than the lease", () => {
  let shared: SharedState;
  const nodes: TestNode[] = [];

  beforeAll(async () => {
    shared = await startSharedState();
  }, 90_000);
  afterAll(() => closeCluster(nodes, shared), 60_000);

  it("takes no healthy worker's shards: after the restart the workers renew first, and nothing runs twice", async () => {
    const env = { ...COMMON, SHARD_SIZE: "300" };
    const api = await startNode(shared, { ...env, ROLE: "api" });
    const worker = await startNode(shared, { ...env, ROLE: "worker", WORKER_ID: "steady", WORKER_CAPACITY: "3" });
    nodes.push(api, worker);
    const file = await uploadJsonl(api.baseUrl, completionJsonl(900, { prefix: "ol", maxTokens: 32 }));
    const b = await openaiClient(api).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
    await pollBatch(api.baseUrl, b.id, (x) => x.request_counts.completed > 0, 60_000);
    // Down for two and a half leases (LEASE_SECONDS=4): every lease lapses on the database's clock meanwhile.
    shared.pg.stop();
    // Meanwhile the API says why it cannot answer, and readiness fails, so a load balancer looks elsewhere.
    for (const path of ["/v1/batches", `/v1/batches/${b.id}`, "/v1/files"]) {
      const res = await fetch(`${api.baseUrl}${path}`);
      expect(res.status, path).toBe(503);
      expect(res.headers.get("retry-after")).toBe("5");
      expect(((await res.json()) as any).error).toMatchObject({ code: "database_unavailable", type: "server_error" });
    }
    const created = await fetch(`${api.baseUrl}/v1/batches`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" }),
    });
    expect(created.status).toBe(503);
    for (const node of [api, worker]) {
      const ready = await fetch(`${node.baseUrl}/ready`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as any).error.code).toBe("database_unavailable");
    }
    await new Promise((r) => setTimeout(r, 9_000));
    shared.pg.start();
    const outageEnded = Date.now();
    await expect.poll(async () => (await fetch(`${api.baseUrl}/ready`)).status, { timeout: 15_000 }).toBe(200);
    const done = await waitForBatch(api.baseUrl, b.id, 150_000);
    const { output, errors } = await downloadResults(api, done);
    const v = checkBatch(done as any, customIds("ol", 900), output, errors);
    expect(v, describeVerdict(v)).toEqual({ batch: b.id, lost: 0, duplicated: 0, mismatches: [] });
    // The worker was healthy throughout: no shard was taken from it, so each request ran once.
    // (completed_at is whole seconds: the batch may end within the second the outage ended in.)
    expect(done.completed_at).toBeGreaterThanOrEqual(Math.floor(outageEnded / 1000));
    expect(worker.calls.bodies.filter((x) => x.includes("story ol ")).length).toBe(900);
    // The S3 server down: contents and readiness answer storage_unavailable, never a 500.
    await shared.stopS3();
    try {
      const content = await fetch(`${api.baseUrl}/v1/files/${done.output_file_id}/content`);
      expect(content.status).toBe(503);
      expect(((await content.json()) as any).error.code).toBe("storage_unavailable");
      await new Promise((r) => setTimeout(r, 1_100));
      const ready = await fetch(`${api.baseUrl}/ready`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as any).error.code).toBe("storage_unavailable");
    } finally {
      await shared.startS3();
    }
    await expect.poll(async () => (await fetch(`${api.baseUrl}/ready`)).status, { timeout: 15_000 }).toBe(200);
  }, 200_000);
});

describe.skipIf(!POSTGRES_BIN)("distributed mode: a frozen maintenance leader", () => {
  let shared: SharedState;
  const nodes: TestNode[] = [];
  let leader: ServerProcess | undefined;

  beforeAll(async () => {
    shared = await startSharedState();
  }, 90_000);
  afterAll(async () => {
    if (leader && leader.child.exitCode === null) {
      leader.child.kill("SIGCONT");
      leader.child.kill("SIGKILL");
    }
    await closeCluster(nodes, shared);
  }, 60_000);

  it("loses the lease within LEASE_SECONDS: another process finalizes, and the old leader steps down when it wakes", async () => {
    const first = await startChild(shared, { ...COMMON, ROLE: "api", WORKER_ID: "frozen" });
    leader = first;
    for (let i = 0; i < 200 && !/now runs the maintenance/.test(first.output()); i++) await new Promise((r) => setTimeout(r, 50));
    expect(first.output()).toMatch(/now runs the maintenance/);
    const api = await startNode(shared, { ...COMMON, ROLE: "api", WORKER_ID: "api-2" });
    nodes.push(api, await startNode(shared, { ...COMMON, ROLE: "worker", WORKER_ID: "w" }));
    first.child.kill("SIGSTOP");
    const file = await uploadJsonl(api.baseUrl, completionJsonl(120, { prefix: "fz", maxTokens: 16 }));
    const b = await openaiClient(api).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
    const ranAll = await pollBatch(api.baseUrl, b.id, (x) => x.request_counts.completed === 120, 60_000);
    const allRanAt = Date.now();
    expect(ranAll.status).not.toBe("completed");
    // The frozen leader's lease (LEASE_SECONDS=4) lapses; the next holder takes over within twice the lease and
    // finalizes (8 s more allowed for a machine loaded by the whole suite; before the lease it waited until SIGCONT,
    // which comes only after this).
    const done = await waitForBatch(api.baseUrl, b.id, 30_000);
    expect(done.status).toBe("completed");
    expect(Date.now() - allRanAt).toBeLessThan(2 * 4_000 + 8_000);
    const { output, errors } = await downloadResults(api, done);
    const v = checkBatch(done as any, customIds("fz", 120), output, errors);
    expect(v, describeVerdict(v)).toEqual({ batch: b.id, lost: 0, duplicated: 0, mismatches: [] });
    first.child.kill("SIGCONT");
    for (let i = 0; i < 100 && !/lost the maintenance lease/.test(first.output()); i++) await new Promise((r) => setTimeout(r, 50));
    expect(first.output()).toMatch(/lost the maintenance lease/);
    const c = new pg.Client(shared.pg.url);
    await c.connect();
    const { rows } = await c.query("SELECT holder, term FROM leader_leases WHERE name = 'maintenance'");
    await c.end();
    expect(rows[0].holder).not.toBe("maintenance:frozen");
    expect(Number(rows[0].term)).toBeGreaterThan(1);
  }, 120_000);
});
