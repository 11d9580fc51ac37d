// The in-process cluster state kept in files: everything a process recorded is there when the next one opens the
// folder (batches with their shards, parts and counts; files; the order of both), the leases the dead process held
// are back in the queue under a new epoch, and an unreadable document costs only itself.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { singleModelRegistry } from "../../backends/registry.js";
import { newBatchObject } from "../../domain/batch-object.js";
import { memoryPorts, openStateFiles } from "../../embedded/index.js";
import type { ClaimOptions } from "../../state/ports.js";
import { FsBlobStore } from "../../stores/fs-blob-store.js";

const silent = pino({ level: "silent" });
const now = () => Math.floor(Date.now() / 1000);
const usage = { promptTokens: 5, completionTokens: 4, cachedTokens: 2 };
const dirs: string[] = [];
const UP = `file-${"u".repeat(24)}`;
const tmp = () => {
  const d = mkdtempSync(path.join(os.tmpdir(), "obi-statefiles-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function newBatch(n: number, total: number) {
  return newBatchObject({
    id: `batch_${String(n).padStart(24, "0")}`,
    endpoint: "/v1/completions",
    completion_window: "24h",
    inputFileId: "file-in",
    created: now(),
    windowSeconds: 86_400,
    validation: { ok: true, total, errors: [], errorCount: 0, model: "m" },
    registry: singleModelRegistry("/models/m.gguf", false),
  });
}
const claimOpts = (o: Partial<ClaimOptions> = {}): ClaimOptions => ({
  workerId: "w1",
  pool: "spot",
  models: ["m"],
  limit: 5,
  leaseSeconds: 30,
  urgentSeconds: 600,
  now: now(),
  ...o,
});

describe("the in-process state kept in files", () => {
  it("is read back whole by the next process, with the dead process's leases back in the queue", async () => {
    // One folder holds the state and the contents, as BATCH_DIR does.
    const dir = tmp();
    const blobs = new FsBlobStore(dir);
    const open = async () => memoryPorts({ state: await openStateFiles(dir, silent), blobs, expirySeconds: 3600, now });
    const first = await open();
    const a = newBatch(1, 20);
    const gone = newBatch(2, 10);
    // Two models (a base and its adapter): the counts per model are kept with the batch's.
    const plan = [
      { byteStart: 0, byteEnd: 50, total: 10, model: "m" },
      { byteStart: 50, byteEnd: 100, total: 10, model: "a1" },
    ];
    await first.batches.insert({
      batch: a,
      owner: "k1",
      inputKey: "files/in.jsonl",
      shards: plan,
      outputExpiresAfter: { anchor: "created_at", seconds: 7200 },
    });
    await first.batches.insert({ batch: gone, owner: "k1", inputKey: "files/in.jsonl", shards: plan.slice(0, 1) });
    const [s0, s1] = await first.queue.claim(claimOpts({ models: ["m", "a1"] }));
    expect([s0.batchId, s0.idx, s1.idx]).toEqual([a.id, 0, 1]);
    await first.queue.commit(s0, { part: { output: "p0-out", errors: "p0-err" }, completed: 9, failed: 1, usage }, 30);
    await first.queue.finish({ ...s0, checkpoints: 1 });
    await first.queue.commit(s1, { part: { output: "p1-out" }, completed: 4, failed: 0, usage }, 30);
    await first.batches.update(a.id, ["validating"], (r) => {
      r.batch.status = "in_progress";
      r.batch.in_progress_at = 1234;
    });
    await first.batches.remove(gone.id);
    await blobs.put("files/up.jsonl", (await import("node:stream")).Readable.from(["{}\n"]));
    const up = await first.files.record({
      id: UP,
      key: "files/up.jsonl",
      size: 3,
      filename: "up.jsonl",
      purpose: "batch",
      owner: "k1",
    });
    const before = (await first.batches.get(a.id))!;
    await first.close();

    const second = await open();
    expect(await second.batches.get(a.id)).toEqual(before);
    expect(before.batch.request_counts).toEqual({ completed: 13, failed: 1, total: 20 });
    expect(Object.entries(before.batch.usage_by_model!).map(([m, u]) => [m, u.request_counts, u.usage.output_tokens])).toEqual([
      ["m", { completed: 9, failed: 1, total: 10 }, 4],
      ["a1", { completed: 4, failed: 0, total: 10 }, 4],
    ]);
    expect(before.outputExpiresAfter).toEqual({ anchor: "created_at", seconds: 7200 });
    expect(await second.batches.get(gone.id)).toBeUndefined();
    expect(await second.files.get(UP, "k1")).toEqual({ object: up, owner: "k1" });
    expect((await second.queue.ofBatch(a.id)).map((s) => [s.state, s.parts])).toEqual([
      ["done", [{ output: "p0-out", errors: "p0-err" }]],
      ["queued", [{ output: "p1-out" }]],
    ]);
    // The shard the dead process ran went back to the queue at open (epoch 2) and goes to the next claimer (3), its
    // part kept; the dead process's epoch can commit nothing.
    const [again] = await second.queue.claim(claimOpts({ workerId: "w2", models: ["m", "a1"] }));
    expect([again.idx, again.epoch, again.checkpoints, again.parts]).toEqual([1, 3, 1, [{ output: "p1-out" }]]);
    expect(await second.queue.commit({ ...s1, checkpoints: 1 }, { part: {}, completed: 1, failed: 0, usage }, 30)).toBe("fenced");
    // Submission order goes on from where it was: a new batch lists first.
    const b = newBatch(3, 5);
    await second.batches.insert({ batch: b, owner: "k1", inputKey: null, shards: [] });
    expect((await second.batches.list({ limit: 5, owner: "k1" })).data.map((x) => x.id)).toEqual([b.id, a.id]);
    await second.close();
  });

  it("skips an unreadable document and keeps the rest; leaves no temp files behind", async () => {
    const dir = tmp();
    const ports = memoryPorts({ state: await openStateFiles(dir, silent), blobs: new FsBlobStore(tmp()), expirySeconds: 3600, now });
    const a = newBatch(1, 3);
    const b = newBatch(2, 3);
    for (const x of [a, b]) await ports.batches.insert({ batch: x, owner: null, inputKey: null, shards: [] });
    // Many changes at once coalesce; the document ends as the last one left it.
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        ports.batches.update(a.id, ["validating"], (r) => {
          r.batch.metadata = { n: String(i) };
        }),
      ),
    );
    await ports.close();
    writeFileSync(path.join(dir, b.id, "batch.json"), "{ torn");
    expect(readdirSync(path.join(dir, a.id)).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    const again = memoryPorts({ state: await openStateFiles(dir, silent), blobs: new FsBlobStore(tmp()), expirySeconds: 3600, now });
    expect((await again.batches.get(a.id))?.batch.metadata).toEqual({ n: "19" });
    expect(await again.batches.get(b.id)).toBeUndefined();
  });
});
