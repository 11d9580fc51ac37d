// Shards run in place: the cluster domain on one process's state kept in files, results appended to files of the
// local folder as requests finish. A one-shard batch lives in <folder>/<batch_id>/ as one machine has always kept
// it; a restart counts every whole line on disk, committed or not, and runs only the rest.
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { countCalls, downloadResults, memoryState, startNode, type TestNode } from "../helpers/cluster.js";
import { pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

const COMMON = { SHARD_SIZE: "250", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4" };
const ran = (calls: string[], marker: string) => calls.filter((b) => b.includes(`story ${marker} `)).length;

describe("shards run in place, on state kept in files", () => {
  const mem = memoryState({ inPlace: true });
  let nodes: TestNode[] = [];
  let calls: string[][] = [];

  async function start() {
    nodes = [
      await startNode(mem, { ...COMMON, WORKER_ID: "w-spot", WORKER_POOL: "spot", WORKER_CAPACITY: "1" }, mem.open),
      await startNode(mem, { ...COMMON, WORKER_ID: "w-ded", WORKER_POOL: "dedicated", WORKER_CAPACITY: "1" }, mem.open),
    ];
    calls = nodes.map((n) => countCalls(n));
  }
  async function stop() {
    for (const n of nodes) await n.close({ graceMs: 0 });
  }
  async function submit(n: number, marker: string) {
    const file = await uploadJsonl(nodes[0].baseUrl, completionJsonl(n, { prefix: marker }));
    return openaiClient(nodes[0]).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
  }

  afterAll(async () => {
    await stop();
    mem.close();
  });

  it("keeps a one-shard batch's results in <folder>/<batch_id>/ and assembles a larger batch's there", async () => {
    await start();
    const small = await submit(60, "p1");
    const large = await submit(300, "p2");
    const [a, b] = [await waitForBatch(nodes[1].baseUrl, small.id, 90_000), await waitForBatch(nodes[1].baseUrl, large.id, 90_000)];
    expect([a.status, b.status]).toEqual(["completed", "completed"]);
    expect(b.request_counts).toEqual({ completed: 300, failed: 0, total: 300 });
    for (const [batch, n, marker] of [
      [a, 60, "p1"],
      [b, 300, "p2"],
    ] as const) {
      const { ids } = await downloadResults(nodes[0], batch);
      expect(ids).toEqual(customIds(marker, n).sort());
      expect(ran(calls[0], marker) + ran(calls[1], marker)).toBe(n);
      // The output file is the folder's own <batch_id>/output.jsonl; the large batch's shard files are gone.
      const onDisk = readFileSync(path.join(mem.dir, batch.id, "output.jsonl"), "utf8");
      expect(onDisk).toBe(await (await openaiClient(nodes[0]).files.content(batch.output_file_id!)).text());
      expect(existsSync(path.join(mem.dir, batch.id, "shards"))).toBe(false);
    }
    await stop();
  }, 120_000);

  it("after a restart, counts every whole line on disk (committed or not, a torn tail cut off) and runs only the rest", async () => {
    await start();
    const b = await submit(200, "p3");
    await pollBatch(nodes[0].baseUrl, b.id, (x) => x.request_counts.completed >= 10, 60_000);
    await stop();
    const out = path.join(mem.dir, b.id, "output.jsonl");
    const written = readFileSync(out, "utf8").trim().split("\n");
    const done = new Set(written.map((l) => JSON.parse(l).custom_id));
    expect(done.size).toBeLessThan(200);
    // Lines a process wrote and died before committing (3 whole ones), and one it was writing when it died.
    const missing = customIds("p3", 200).filter((id) => !done.has(id));
    const template = JSON.parse(written[0]);
    for (const id of missing.slice(0, 3)) appendFileSync(out, `${JSON.stringify({ ...template, custom_id: id })}\n`);
    appendFileSync(out, `{"id":"batch_req_torn","custom_id":"${missing[3]}","resp`);

    await mem.reopen();
    await start();
    const after = await waitForBatch(nodes[0].baseUrl, b.id, 90_000);
    expect(after.status).toBe("completed");
    expect(after.request_counts).toEqual({ completed: 200, failed: 0, total: 200 });
    const { ids, output } = await downloadResults(nodes[0], after);
    expect(ids).toEqual(customIds("p3", 200).sort());
    // Each custom_id once means nothing on disk ran again (a rerun appends a second line); the uncommitted lines
    // are the ones written before the restart, word for word.
    for (const id of missing.slice(0, 3)) expect(output.find((l) => l.custom_id === id)).toEqual({ ...template, custom_id: id });
    expect(output.find((l) => l.custom_id === missing[3]).id).not.toBe("batch_req_torn");
  }, 120_000);
});
