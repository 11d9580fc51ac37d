// Shards of a model no live worker serves: left waiting while no worker is live at all and during the grace, then
// claimed and ended with model_not_found lines; a model a live worker serves is never touched.
import pino from "pino";
import { describe, expect, it, vi } from "vitest";
import { singleModelRegistry } from "../../backends/registry.js";
import { UnservedShards } from "../../batches/close-out.js";
import { newBatchObject } from "../../domain/batch-object.js";
import { memoryPorts } from "../../embedded/index.js";
import { MemoryState } from "../../embedded/state.js";
import type { AbortReason } from "../../pipeline/types.js";
import type { ClaimedShard } from "../../state/ports.js";
import { FsBlobStore } from "../../stores/fs-blob-store.js";

const now = () => Math.floor(Date.now() / 1000);

async function setUp(graceSeconds: number, served?: string[]) {
  const ports = memoryPorts({ state: new MemoryState(), blobs: new FsBlobStore("/nonexistent"), expirySeconds: 3600, now });
  const batch = newBatchObject({
    id: `batch_${"1".repeat(24)}`,
    endpoint: "/v1/completions",
    completion_window: "24h",
    inputFileId: "file-x",
    created: now(),
    windowSeconds: 86_400,
    validation: { ok: true, total: 20, errors: [], errorCount: 0, model: "base" },
    registry: singleModelRegistry("/models/base.gguf", false),
  });
  const shards = [
    { byteStart: 0, byteEnd: 10, total: 10, model: "base" },
    { byteStart: 10, byteEnd: 20, total: 10, model: "gone-v1" },
  ];
  await ports.batches.insert({ batch, owner: null, inputKey: "files/x.jsonl", shards });
  // What the run of each closed-out shard was told: the lines it writes come from the reason (run-batch.ts).
  const ended: Array<[ClaimedShard, AbortReason]> = [];
  const newRun = (shard: ClaimedShard) => ({
    run: async (_backend: unknown, signal?: AbortSignal) => {
      ended.push([shard, signal?.reason as AbortReason]);
      await ports.queue.finish(shard);
    },
  });
  const unserved = new UnservedShards({
    queue: ports.queue,
    workers: ports.workers,
    newRun: newRun as never,
    logger: pino({ level: "silent" }),
    leaseSeconds: 30,
    graceSeconds,
    ...(served && { served }),
    id: "maintenance:test",
  });
  return { ports, unserved, ended };
}

describe("shards of a model no live worker serves", () => {
  it("wait while no worker is live, then end with model_not_found lines once one serving other models is", async () => {
    const { ports, unserved, ended } = await setUp(0);
    await unserved.closeOut();
    expect(ended).toEqual([]);
    await ports.workers.register({ id: "w", pool: "dedicated", capacity: 1, models: ["base"], running: [] });
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 6_000);
      await unserved.closeOut();
    } finally {
      vi.useRealTimers();
    }
    expect(ended.map(([s, r]) => [s.idx, s.model, r.code])).toEqual([[1, "gone-v1", "model_not_found"]]);
    expect(ended[0][1].message).toContain("'gone-v1'");
    expect((await ports.queue.ofBatch(`batch_${"1".repeat(24)}`)).map((s) => s.state)).toEqual(["queued", "done"]);
  });

  it("wait out the grace: a worker serving the model that comes back within it runs them", async () => {
    const { ports, unserved, ended } = await setUp(60);
    const serving = [{ id: "w", models: ["base"] }];
    // Each look after the workers' heartbeats, so each is live at it.
    const lookAfter = async (ms: number) => {
      vi.setSystemTime(Date.now() + ms);
      for (const w of serving) await ports.workers.register({ ...w, pool: "dedicated", capacity: 1, running: [] });
      await unserved.closeOut();
    };
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      await lookAfter(0);
      await lookAfter(30_000);
      expect(ended).toEqual([]);
      serving.push({ id: "w2", models: ["gone-v1"] });
      await lookAfter(60_000);
      expect(ended).toEqual([]);
      // Gone again: the grace starts over, then its lines end.
      serving.pop();
      await ports.workers.unregister("w2");
      await lookAfter(10_000);
      await lookAfter(50_000);
      expect(ended).toEqual([]);
      await lookAfter(15_000);
      expect(ended.map(([s]) => s.model)).toEqual(["gone-v1"]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("go by what the process serves where its workers are the only ones: none live (a shutdown) changes nothing", async () => {
    const { unserved, ended } = await setUp(0, ["base", "base-alias"]);
    await unserved.closeOut();
    expect(ended.map(([s, r]) => [s.model, r.code])).toEqual([["gone-v1", "model_not_found"]]);
    const all = await setUp(0, ["base", "gone-v1"]);
    await all.unserved.closeOut();
    expect(all.ended).toEqual([]);
  });
});
