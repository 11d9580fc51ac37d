// The distributed mode's domain (batch service, workers, shard runs, maintenance, finalizing) on the cluster ports
// in one process's memory, with the real engine: what the PostgreSQL tests check, on every machine, database or not.
// Two API nodes and a spot and a dedicated worker node share one state.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { countCalls, downloadResults, memoryState, startNode, type TestNode } from "../helpers/cluster.js";
import { pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

const COMMON = { SHARD_SIZE: "10", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4" };
const ran = (calls: string[], marker: string) => calls.filter((b) => b.includes(`story ${marker} `)).length;
/** One sample (`name{labels}`) summed over the nodes: each line of that name holding those labels (and its process's). */
async function metricSum(nodes: TestNode[], sample: string): Promise<number> {
  const [name, labels = ""] = sample.replace(/}$/, "").split("{");
  const wanted = labels ? labels.split(",") : [];
  let sum = 0;
  for (const n of nodes) {
    for (const line of (await (await fetch(`${n.baseUrl}/metrics`)).text()).split("\n")) {
      const m = /^([a-z_]+)\{(.*)\} (\S+)$/.exec(line);
      if (m && m[1] === name && wanted.every((l) => m[2].split(",").includes(l))) sum += Number(m[3]);
    }
  }
  return sum;
}

describe("the distributed mode's domain on in-process ports", () => {
  const mem = memoryState();
  let apiA: TestNode;
  let apiB: TestNode;
  let spot: TestNode;
  let dedicated: TestNode;
  let calls: string[][];

  beforeAll(async () => {
    const api = { ...COMMON, ROLE: "api" };
    apiA = await startNode(mem, api, mem.open);
    apiB = await startNode(mem, api, mem.open);
    spot = await startNode(mem, { ...COMMON, ROLE: "all", WORKER_ID: "w-spot", WORKER_POOL: "spot", WORKER_CAPACITY: "1" }, mem.open);
    dedicated = await startNode(
      mem,
      { ...COMMON, ROLE: "all", WORKER_ID: "w-ded", WORKER_POOL: "dedicated", WORKER_CAPACITY: "1", SPOT_PREEMPT_COOLDOWN_SECONDS: "60" },
      mem.open,
    );
    calls = [countCalls(spot), countCalls(dedicated)];
  }, 120_000);

  afterAll(async () => {
    for (const n of [spot, dedicated, apiA, apiB]) await n?.close();
    mem.close();
  }, 60_000);

  it("runs a batch submitted to one node over both workers (dedicated takes ordinary work while spot is full); the other node serves it", async () => {
    const file = await uploadJsonl(apiA.baseUrl, completionJsonl(45, { prefix: "m1" }));
    const created = await openaiClient(apiA).batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    expect((await openaiClient(apiB).batches.retrieve(created.id)).id).toBe(created.id);
    const done = await waitForBatch(apiB.baseUrl, created.id, 90_000);
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ completed: 45, failed: 0, total: 45 });
    const { output, errors, ids } = await downloadResults(apiB, done);
    expect(errors).toEqual([]);
    expect(ids).toEqual(customIds("m1", 45).sort());
    expect(output.every((l) => l.response.status_code === 200)).toBe(true);
    expect(ran(calls[0], "m1") + ran(calls[1], "m1")).toBe(45);
    expect(calls.every((c) => ran(c, "m1") > 0)).toBe(true);
    // /metrics: each worker counts the requests it ran, the finalizing node the batch; summed over the nodes, as
    // Prometheus sums instances.
    const nodes = [apiA, apiB, spot, dedicated];
    expect(await metricSum(nodes, 'obi_batch_requests_total{endpoint="/v1/completions",outcome="completed"}')).toBe(45);
    expect(await metricSum(nodes, 'obi_batches_total{status="completed"}')).toBe(1);
    expect(await metricSum(nodes, 'obi_completion_tokens_total{endpoint="/v1/completions"}')).toBe(done.usage.output_tokens);
    // The cluster's gauges (queue, pools) come from the maintenance's leader alone: summed over nodes, counted once.
    const texts = await Promise.all(nodes.map(async (n) => (await fetch(`${n.baseUrl}/metrics`)).text()));
    expect(texts.filter((t) => /^obi_queue_max_depth\{scope="cluster",process="[^"]+"\} \d+$/m.test(t))).toHaveLength(1);
    expect(texts.filter((t) => /^obi_pool_capacity\{/m.test(t))).toHaveLength(1);
    const pools = (await (await fetch(`${apiA.baseUrl}/pools`)).json()) as any;
    expect(pools.pools.map((p: any) => [p.name, p.workers.map((w: any) => w.id)])).toEqual(
      expect.arrayContaining([
        ["spot", ["w-spot"]],
        ["dedicated", ["w-ded"]],
      ]),
    );
  }, 120_000);

  it("a cancel stops the batch on every worker; each request ends once, in the output or as cancelled", async () => {
    const file = await uploadJsonl(apiA.baseUrl, completionJsonl(200, { prefix: "m2" }));
    const created = await openaiClient(apiA).batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    await pollBatch(apiA.baseUrl, created.id, (b) => b.request_counts.completed >= 10, 60_000);
    const cancelling = await openaiClient(apiB).batches.cancel(created.id);
    expect(cancelling.status).toBe("cancelling");
    const done = await waitForBatch(apiA.baseUrl, created.id, 60_000);
    expect(done.status).toBe("cancelled");
    expect(done.request_counts.completed + done.request_counts.failed).toBe(200);
    expect(done.request_counts.failed).toBeGreaterThan(0);
    const { output, errors, ids } = await downloadResults(apiA, done);
    expect(ids).toEqual(customIds("m2", 200).sort());
    expect(output.length).toBe(done.request_counts.completed);
    expect(errors.every((l) => l.error.code === "batch_cancelled")).toBe(true);
  }, 120_000);

  it("a spot reclaim hands the spot worker's shards to dedicated, resumed from their checkpoints: nothing runs twice", async () => {
    const file = await uploadJsonl(apiA.baseUrl, completionJsonl(120, { prefix: "m3" }));
    const created = await openaiClient(apiA).batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    await pollBatch(apiA.baseUrl, created.id, () => ran(calls[0], "m3") >= 5, 60_000);
    const body = (await (await fetch(`${apiB.baseUrl}/pools/spot/preempt`, { method: "POST" })).json()) as any;
    expect(body.cooldown_seconds).toBe(60);
    // The reclaimed slots count as preempted, not as gone, as the embedded pools show them.
    const spotPool = async () => ((await (await fetch(`${apiA.baseUrl}/pools`)).json()) as any).pools.find((p: any) => p.name === "spot");
    for (let i = 0; i < 50 && (await spotPool()).preempted === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await spotPool()).toMatchObject({ capacity: 1, preempted: 1, available: 0 });
    const spotCalls = ran(calls[0], "m3");
    const done = await waitForBatch(apiA.baseUrl, created.id, 90_000);
    expect(done.status).toBe("completed");
    const { ids } = await downloadResults(apiA, done);
    expect(ids).toEqual(customIds("m3", 120).sort());
    // The spot worker stopped claiming (at most the requests it had in flight ran after the reclaim)...
    expect(ran(calls[0], "m3")).toBeLessThanOrEqual(spotCalls + 8);
    // ...and what it ran was checkpointed before the hand-back, so the total is exactly one call per request.
    expect(ran(calls[0], "m3") + ran(calls[1], "m3")).toBe(120);
  }, 120_000);

  it("with SPOT_PREEMPTIONS_PER_HOUR, a spot worker is reclaimed at random and every batch still completes exactly once", async () => {
    // About five reclaims a second, each followed by a one-second cooldown; the batch runs for seconds, so the
    // chance that none falls inside it is negligible (about e^-10 for two seconds).
    const flaky = await startNode(
      mem,
      {
        ...COMMON,
        ROLE: "worker",
        WORKER_ID: "w-flaky",
        WORKER_POOL: "spot",
        SPOT_PREEMPTIONS_PER_HOUR: "18000",
        SPOT_PREEMPT_COOLDOWN_SECONDS: "1",
      },
      mem.open,
    );
    const spotReclaims = async () =>
      ((await (await fetch(`${apiA.baseUrl}/pools`)).json()) as any).pools.find((p: any) => p.name === "spot").preemptions;
    try {
      const before = await spotReclaims();
      const n = 800;
      const flakyCalls = countCalls(flaky);
      const file = await uploadJsonl(apiA.baseUrl, completionJsonl(n, { prefix: "m4" }));
      const created = await openaiClient(apiA).batches.create({
        input_file_id: file.id,
        endpoint: "/v1/completions",
        completion_window: "24h",
      });
      const done = await waitForBatch(apiA.baseUrl, created.id, 90_000);
      expect(done.status).toBe("completed");
      expect((await downloadResults(apiA, done)).ids).toEqual(customIds("m4", n).sort());
      expect(ran(flakyCalls, "m4") + ran(calls[0], "m4") + ran(calls[1], "m4")).toBe(n);
      expect(await spotReclaims()).toBeGreaterThan(before);
    } finally {
      await flaky.close();
    }
  }, 120_000);
});
