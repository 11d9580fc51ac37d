// Retrying failed lines in the distributed mode (its domain on in-process ports): through the HTTP API of one
// node while another works, the new batch takes only the failed lines, and no line that succeeded runs again.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { countCalls, downloadResults, memoryState, startNode, type TestNode } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

const COMMON = { SHARD_SIZE: "5", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4" };

/** Twelve lines; lines 3 and 8 ask for `suffix`, which the engine refuses per line (400 unsupported_parameter). */
function mixedJsonl(prefix: string): string {
  return completionJsonl(12, { prefix, maxTokens: 4 })
    .trimEnd()
    .split("\n")
    .map((l, i) => (i === 3 || i === 8 ? l.replace('"max_tokens"', '"suffix":"!","max_tokens"') : l))
    .join("\n")
    .concat("\n");
}

describe("retrying failed lines, and the console's data (distributed mode)", () => {
  const mem = memoryState();
  let api: TestNode;
  let worker: TestNode;

  beforeAll(async () => {
    api = await startNode(mem, { ...COMMON, ROLE: "api" }, mem.open);
    worker = await startNode(mem, { ...COMMON, ROLE: "worker", WORKER_ID: "w1", WORKER_POOL: "spot" }, mem.open);
  }, 120_000);
  afterAll(async () => {
    for (const n of [worker, api]) await n?.close();
    mem.close();
  }, 60_000);

  it("creates a batch of only the failed lines, linked by metadata.retry_of, and reruns no success", async () => {
    const client = openaiClient(api);
    const file = await uploadJsonl(api.baseUrl, mixedJsonl("rt"));
    const first = await client.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      metadata: { team: "evals" },
    });
    const done = await waitForBatch(api.baseUrl, first.id);
    expect(done.request_counts).toEqual({ completed: 10, failed: 2, total: 12 });
    const ranBefore = countCalls(worker).length;

    const refused = await fetch(`${api.baseUrl}/v1/batches/${first.id}/retry`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ codes: ["unsupported_parameter"], only_new: true }),
    });
    expect(refused.status).toBe(400);
    expect((await refused.json()).error.message).toContain("only_new");
    const unknown = await fetch(`${api.baseUrl}/v1/batches/batch_00000000000000000000dead/retry`, { method: "POST" });
    expect(unknown.status).toBe(404);

    const res = await fetch(`${api.baseUrl}/v1/batches/${first.id}/retry`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ codes: ["unsupported_parameter"] }),
    });
    expect(res.status).toBe(200);
    const retry = await res.json();
    expect(retry.metadata).toEqual({ team: "evals", retry_of: first.id });
    const again = await waitForBatch(api.baseUrl, retry.id);
    expect(again.request_counts).toEqual({ completed: 0, failed: 2, total: 2 });
    const { errors, output } = await downloadResults(api, again);
    expect(output).toEqual([]);
    expect(errors.map((l) => l.custom_id).sort()).toEqual(["rt-3", "rt-8"]);
    // Refused per line before they run: the retry made no engine call at all, so no success ran twice.
    expect(countCalls(worker).length).toBe(ranBefore);

    const nothing = await fetch(`${api.baseUrl}/v1/batches/${first.id}/retry`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ codes: ["server_error"] }),
    });
    expect(nothing.status).toBe(400);
    expect((await nothing.json()).error).toMatchObject({ code: "nothing_to_retry", type: "invalid_request_error" });
  });

  it("shows a batch's shards and the worker that ran each, the pools' workers, and filters by status", async () => {
    const file = await uploadJsonl(api.baseUrl, completionJsonl(12, { prefix: "cs", maxTokens: 2 }), {}, "sharded.jsonl");
    const b = await openaiClient(api).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
    await waitForBatch(api.baseUrl, b.id);
    const page = await (await fetch(`${api.baseUrl}/console/api/batches/${b.id}`)).json();
    expect(page.input_filename).toBe("sharded.jsonl");
    expect(page.shards).toHaveLength(3);
    for (const s of page.shards) expect(s).toMatchObject({ state: "done", worker: "w1", total: expect.any(Number) });
    expect(page.shards.reduce((n: number, s: { completed: number }) => n + s.completed, 0)).toBe(12);
    const overview = await (await fetch(`${api.baseUrl}/console/api/overview`)).json();
    expect(overview.pools.find((p: { name: string }) => p.name === "spot").workers.map((w: { id: string }) => w.id)).toContain("w1");
    const completed = await (await fetch(`${api.baseUrl}/console/api/batches?status=completed&q=sharded`)).json();
    expect(completed.data.map((x: { id: string }) => x.id)).toEqual([b.id]);
    const none = await (await fetch(`${api.baseUrl}/console/api/batches?status=failed`)).json();
    expect(none.data).toEqual([]);
    // Paging by cursor, newest first, over more batches than a page holds.
    for (let i = 0; i < 4; i++) {
      const f = await uploadJsonl(api.baseUrl, completionJsonl(1, { prefix: `pg${i}`, maxTokens: 1 }));
      await openaiClient(api).batches.create({ input_file_id: f.id, endpoint: "/v1/completions", completion_window: "24h" });
    }
    const all = (await (await fetch(`${api.baseUrl}/console/api/batches?limit=100`)).json()).data.map((x: { id: string }) => x.id);
    expect(all.length).toBeGreaterThanOrEqual(5);
    const seen: string[] = [];
    let after = "";
    for (;;) {
      const page = await (await fetch(`${api.baseUrl}/console/api/batches?limit=2${after ? `&after=${after}` : ""}`)).json();
      seen.push(...page.data.map((x: { id: string }) => x.id));
      if (!page.has_more) break;
      after = page.last_id;
    }
    expect(seen).toEqual(all);
    const bad = await fetch(`${api.baseUrl}/console/api/batches?status=done`);
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.param).toBe("status");
  });
});
