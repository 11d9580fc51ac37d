// The distributed mode on real components: PostgreSQL 15 (a throwaway cluster) and an S3 protocol server, with API
// servers and workers of the real service (real engine) sharing them. Skips with a note where PostgreSQL is absent.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { haveChromium, launchChromium } from "../helpers/browser.js";
import { countCalls, downloadResults, type SharedState, startNode, startSharedState, type TestNode } from "../helpers/cluster.js";
import { pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

describe.skipIf(!POSTGRES_BIN)("distributed mode (PostgreSQL + S3)", () => {
  let shared: SharedState;
  let apiA: TestNode;
  let apiB: TestNode;
  let workers: TestNode[] = [];
  const calls: string[][] = [];

  beforeAll(async () => {
    shared = await startSharedState();
    const common = { SHARD_SIZE: "10", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4" };
    apiA = await startNode(shared, { ...common, ROLE: "api" });
    apiB = await startNode(shared, { ...common, ROLE: "api" });
    workers = [
      await startNode(shared, { ...common, ROLE: "worker", WORKER_POOL: "spot", WORKER_CAPACITY: "2", WORKER_ID: "w-spot" }),
      await startNode(shared, { ...common, ROLE: "worker", WORKER_POOL: "spot", WORKER_CAPACITY: "1", WORKER_ID: "w-spot-2" }),
    ];
    for (const w of workers) calls.push(countCalls(w));
  }, 120_000);

  afterAll(async () => {
    for (const n of [...workers, apiA, apiB]) await n?.close();
    await shared?.close();
  }, 60_000);

  it("runs a batch submitted to one API server across the workers; the other API server sees and serves it", async () => {
    const ids = customIds("d1", 45);
    const file = await uploadJsonl(apiA.baseUrl, completionJsonl(45, { prefix: "d1" }));
    const created = await openaiClient(apiA).batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    expect(created.status).toBe("validating");
    const seenOnB = await openaiClient(apiB).batches.retrieve(created.id);
    expect(seenOnB.id).toBe(created.id);
    const done = await waitForBatch(apiB.baseUrl, created.id, 90_000);
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ completed: 45, failed: 0, total: 45 });
    // OpenAI's field order, as the embedded mode answers (the database keeps its own).
    expect(Object.keys(done).slice(0, 4)).toEqual(["id", "object", "endpoint", "model"]);
    expect(Object.keys(done.request_counts)).toEqual(["completed", "failed", "total"]);
    expect(done.usage.output_tokens).toBeGreaterThan(0);
    const { output, errors } = await downloadResults(apiB, done);
    expect(errors).toEqual([]);
    expect(output.map((l) => l.custom_id).sort()).toEqual([...ids].sort());
    expect(output.every((l) => l.response.status_code === 200)).toBe(true);
    // Every request ran once, spread over both workers.
    const total = calls.reduce((n, c) => n + c.filter((b) => b.includes("story d1 ")).length, 0);
    expect(total).toBe(45);
    expect(calls.every((c) => c.some((b) => b.includes("story d1 ")))).toBe(true);
    const list = await openaiClient(apiA).batches.list();
    expect(list.data.map((b) => b.id)).toContain(created.id);
  }, 120_000);

  it("scopes files and batches to their API key across API servers; /results streams the result lines", async () => {
    const keyed = { SHARD_SIZE: "10", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4", ROLE: "api", API_KEYS: "key-one,key-two" };
    const [k1, k2] = [await startNode(shared, keyed), await startNode(shared, keyed)];
    try {
      const one = { authorization: "Bearer key-one" };
      const two = { authorization: "Bearer key-two" };
      const file = await uploadJsonl(k1.baseUrl, completionJsonl(12, { prefix: "own" }), one);
      const res = await fetch(`${k2.baseUrl}/v1/batches`, {
        method: "POST",
        headers: { "content-type": "application/json", ...one },
        body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" }),
      });
      const created = (await res.json()) as any;
      expect(res.status).toBe(200);
      // The other key sees neither the file nor the batch, on either server.
      expect((await fetch(`${k1.baseUrl}/v1/files/${file.id}`, { headers: two })).status).toBe(404);
      expect((await fetch(`${k2.baseUrl}/v1/batches/${created.id}`, { headers: two })).status).toBe(404);
      expect(((await (await fetch(`${k1.baseUrl}/v1/batches`, { headers: two })).json()) as any).data).toEqual([]);
      const done = await waitForBatch(k1.baseUrl, created.id, 60_000, one);
      expect(done.status).toBe("completed");
      const results = await fetch(`${k2.baseUrl}/v1/batches/${created.id}/results?format=jsonl`, { headers: one });
      const lines = (await results.text())
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(lines.map((l) => l.custom_id).sort()).toEqual(customIds("own", 12).sort());
    } finally {
      await k1.close();
      await k2.close();
    }
  }, 90_000);

  it("/pools and the status page show the registered workers of each pool", async () => {
    const pools = (await (await fetch(`${apiB.baseUrl}/pools`)).json()) as any;
    const spot = pools.pools.find((p: any) => p.name === "spot");
    expect(spot.workers.map((w: any) => [w.id, w.capacity])).toEqual([
      ["w-spot", 2],
      ["w-spot-2", 1],
    ]);
    expect(spot.capacity).toBe(3);
    expect(pools.pools.find((p: any) => p.name === "dedicated")).toMatchObject({ capacity: 0, workers: [] });
    if (!haveChromium) return;
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await page.goto(`${apiA.baseUrl}/`);
      await expect
        .poll(() => page.locator("#pool-spot").innerText(), { timeout: 10_000 })
        .toMatch(/worker w-spot: 0 \/ 2[\s\S]*worker w-spot-2: 0 \/ 1/);
    } finally {
      await browser.close();
    }
  }, 60_000);

  it("a cancel sent to the other API server stops the batch on every worker; each request is accounted for once", async () => {
    const n = 600;
    const file = await uploadJsonl(apiA.baseUrl, completionJsonl(n, { prefix: "c1", maxTokens: 64 }));
    const created = await openaiClient(apiA).batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    await pollBatch(apiB.baseUrl, created.id, (b) => b.request_counts.completed > 0, 30_000);
    const cancelling = await openaiClient(apiB).batches.cancel(created.id);
    expect(["cancelling", "cancelled"]).toContain(cancelling.status);
    const done = await waitForBatch(apiA.baseUrl, created.id, 60_000);
    expect(done.status).toBe("cancelled");
    const c = done.request_counts;
    expect(c.completed + c.failed).toBe(n);
    expect(c.failed).toBeGreaterThan(0);
    expect((await downloadResults(apiA, done)).ids).toEqual(customIds("c1", n).sort());
  }, 90_000);
});
