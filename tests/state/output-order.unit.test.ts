// The output order: entries extended in shard order with what was committed since, consecutive lines of
// one shard merged, and the lines read back from the shards' objects after a line, within a limit, and with what a
// shard holds past the order when a batch is assembled; in one process's state, a reader given only the order as
// written (a full disk gives it what was kept), and a batch of one shard read with nothing written.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { singleModelRegistry } from "../../backends/registry.js";
import { newBatchObject } from "../../domain/batch-object.js";
import { MemoryState, memoryPorts } from "../../embedded/index.js";
import { extendOrder, type OutputOrder, orderedLines, orderedTotal, PartGone } from "../../state/output-order.js";
import { FsBlobStore } from "../../stores/fs-blob-store.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-order-"));
const blobs = new FsBlobStore(dir);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const line = (shard: number, n: number) => JSON.stringify({ custom_id: `s${shard}-${n}` });
async function put(key: string, shard: number, from: number, to: number, tail = "") {
  const text = Array.from({ length: to - from }, (_, i) => `${line(shard, from + i)}\n`).join("") + tail;
  await blobs.put(key, Readable.from([Buffer.from(text)]));
}
const collect = async (it: AsyncIterable<string>) => {
  const out: string[] = [];
  for await (const l of it) out.push(JSON.parse(l).custom_id);
  return out;
};

describe("output order", () => {
  it("extends in shard order with only what grew, merging a shard's consecutive lines", () => {
    let e = extendOrder(
      [],
      [
        { idx: 1, completed: 3 },
        { idx: 0, completed: 0 },
      ],
    );
    expect(e).toEqual([[1, 3]]);
    e = extendOrder(e, [
      { idx: 0, completed: 2 },
      { idx: 1, completed: 3 },
      { idx: 2, completed: 1 },
    ]);
    expect(e).toEqual([
      [1, 3],
      [0, 2],
      [2, 1],
    ]);
    e = extendOrder(e, [
      { idx: 2, completed: 4 },
      { idx: 0, completed: 1 },
    ]);
    // Shard 2 grew right after its own entry: merged. A count below what is ordered (a stale read) adds nothing.
    expect(e).toEqual([
      [1, 3],
      [0, 2],
      [2, 4],
    ]);
    expect(orderedTotal(e)).toBe(9);
  });

  it("reads the lines in order after a line and within a limit, never past a shard's counted lines", async () => {
    await put("a/0-1", 0, 0, 2);
    await put("a/0-2", 0, 2, 5);
    // A file run in place: two lines counted, a third written, a fourth torn.
    await put("a/1", 1, 0, 3, '{"custom_id":"s1-');
    const order: OutputOrder = {
      entries: [
        [1, 1],
        [0, 3],
        [1, 2],
        [0, 4],
      ],
      keys: new Map([
        [0, ["a/0-1", "a/0-2"]],
        [1, ["a/1"]],
      ]),
    };
    const all = ["s1-0", "s0-0", "s0-1", "s0-2", "s1-1", "s0-3"];
    expect(await collect(orderedLines(blobs, order))).toEqual(all);
    for (let after = 0; after <= all.length; after++)
      for (const limit of [1, 2, 10])
        expect(await collect(orderedLines(blobs, order, { after, limit }))).toEqual(all.slice(after, after + limit));
    // Assembling: every shard's remaining whole lines after the order, the torn one left out.
    expect(await collect(orderedLines(blobs, order, { rest: true }))).toEqual([...all, "s0-4", "s1-2"]);
  });

  it("says which part is gone, and that a shard holds fewer lines than counted", async () => {
    const gone: OutputOrder = { entries: [[0, 1]], keys: new Map([[0, ["a/none"]]]) };
    await expect(collect(orderedLines(blobs, gone))).rejects.toBeInstanceOf(PartGone);
    const short: OutputOrder = { entries: [[0, 9]], keys: new Map([[0, ["a/0-1"]]]) };
    await expect(collect(orderedLines(blobs, short))).rejects.toThrow(/holds 2 committed output lines, fewer than the 9/);
  });
});

describe("the order kept in one process's state", () => {
  it("answers only what was written: a state that cannot be written (a full disk) gives the reader the kept order", async () => {
    let failing = false;
    const store = {
      saveBatch: async () => {
        if (failing) throw Object.assign(new Error("no space"), { code: "ENOSPC" });
      },
      saveFile: async () => {},
      flush: async () => {},
    };
    const state = new MemoryState(Date.now, store);
    const ports = memoryPorts({ state, blobs, expirySeconds: 3600, now: () => Math.floor(Date.now() / 1000) });
    const b = newBatchObject({
      id: "batch_000000000000000000000001",
      endpoint: "/v1/completions",
      completion_window: "24h",
      inputFileId: "file-x",
      created: Math.floor(Date.now() / 1000),
      windowSeconds: 86_400,
      validation: { ok: true, total: 20, errors: [], errorCount: 0, model: "m" },
      registry: singleModelRegistry("/models/m.gguf", false),
    });
    const plan = [0, 1].map((i) => ({ byteStart: i * 100, byteEnd: (i + 1) * 100, total: 10 }));
    await ports.batches.insert({ batch: b, owner: null, inputKey: "x", shards: plan });
    const usage = { promptTokens: 0, completionTokens: 0, cachedTokens: 0 };
    const claim = { workerId: "w", pool: null, models: ["m"], limit: 2, leaseSeconds: 30, urgentSeconds: 0, now: 0 };
    const [s0, s1] = await ports.queue.claim(claim);
    await ports.queue.commit(s1, { part: { output: "p1" }, completed: 3, failed: 0, usage }, 30);
    expect((await ports.queue.outputOrder(b.id))!.entries).toEqual([[1, 3]]);
    failing = true;
    await ports.queue.commit(s0, { part: { output: "p0" }, completed: 2, failed: 0, usage }, 30).catch(() => undefined);
    await ports.queue.commit({ ...s1, checkpoints: 1 }, { part: {}, completed: 1, failed: 0, usage, recountable: true }, 30);
    // Not written: the reader gets what was kept, nothing it could lose to a crash.
    expect((await ports.queue.outputOrder(b.id))!.entries).toEqual([[1, 3]]);
    failing = false;
    expect((await ports.queue.outputOrder(b.id))!.entries).toEqual([[1, 4]]);
    // One shard: one order, nothing to write, so a read on a full disk is answered in full.
    await ports.batches.insert({ batch: { ...b, id: "batch_000000000000000000000002" }, owner: null, inputKey: "x", shards: [plan[0]] });
    const [only] = await ports.queue.claim(claim);
    await ports.queue.commit(only, { part: { output: "q0" }, completed: 5, failed: 0, usage }, 30);
    failing = true;
    expect((await ports.queue.outputOrder("batch_000000000000000000000002"))!.entries).toEqual([[0, 5]]);
  });
});
