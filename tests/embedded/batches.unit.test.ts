// One process's batch records where a decision meets the disk: a cancel whose change is still being written when
// the deadline passes must win over the expiry (before, the expiry read the batch past the cancel's lock and the
// batch ended cancelled with every unstarted request marked batch_expired).
import { describe, expect, it } from "vitest";
import { singleModelRegistry } from "../../backends/registry.js";
import { newBatchObject } from "../../domain/batch-object.js";
import { transition } from "../../domain/batch-state.js";
import { MemoryBatchRecords } from "../../embedded/batches.js";
import { MemoryWorkQueue } from "../../embedded/shards.js";
import { type BatchEntry, MemoryState, type StateStore } from "../../embedded/state.js";

/** A store whose next `failures` batch writes fail (a full disk, a folder in the record's place). */
function failingStore(failures: number): StateStore {
  return {
    async saveBatch() {
      if (failures-- > 0) throw Object.assign(new Error("no space left"), { code: "ENOSPC" });
    },
    async saveFile() {},
    async flush() {},
  };
}

/** A store whose batch writes wait until released, as an fsync on a slow disk does. */
function slowStore() {
  let release: () => void = () => undefined;
  let gate: Promise<void> | undefined;
  const store: StateStore = {
    async saveBatch(_s: MemoryState, _id: string, _next?: BatchEntry) {
      await gate;
    },
    async saveFile() {},
    async flush() {},
  };
  return {
    store,
    hold() {
      gate = new Promise((r) => (release = r));
    },
    release: () => release(),
  };
}

describe("memory batch records", () => {
  it("applies nothing of a commit whose record cannot be written, so its retry with more lines counts whole", async () => {
    const store = failingStore(0);
    const state = new MemoryState(Date.now, store);
    const batches = new MemoryBatchRecords(state);
    const queue = new MemoryWorkQueue(state);
    const batch = newBatchObject({
      id: "batch_000000000000000000000002",
      endpoint: "/v1/completions",
      completion_window: "24h",
      inputFileId: "file-x",
      created: Math.floor(Date.now() / 1000),
      windowSeconds: 86_400,
      validation: { ok: true, total: 10, errors: [], errorCount: 0, model: "m" },
      registry: singleModelRegistry("/models/m.gguf", false),
    });
    await batches.insert({ batch, owner: null, inputKey: "k", shards: [{ byteStart: 0, byteEnd: 1, total: 10 }] });
    const [shard] = await queue.claim({ workerId: "w", pool: null, models: ["m"], limit: 1, leaseSeconds: 30, urgentSeconds: 600, now: 0 });
    const usage = { promptTokens: 0, cachedTokens: 0, completionTokens: 0 };
    Object.assign(store, failingStore(1));
    // A run in place's first commit (its output file becoming a part) meets a disk that refuses the record.
    await expect(queue.commit(shard, { part: { output: "out" }, completed: 2, failed: 0, usage, recountable: true }, 30)).rejects.toThrow();
    expect((await batches.get(batch.id))!.batch.request_counts.completed).toBe(0);
    // Its retry carries what was counted since: all of it counts (before: taken for the first, 2 of 5 counted).
    expect(await queue.commit(shard, { part: { output: "out" }, completed: 5, failed: 0, usage, recountable: true }, 30)).toBe("committed");
    expect((await batches.get(batch.id))!.batch.request_counts.completed).toBe(5);
  });

  it("orders a cancel being written before an expiry that comes after it, however slow the disk", async () => {
    const disk = slowStore();
    const state = new MemoryState(Date.now, disk.store);
    const batches = new MemoryBatchRecords(state);
    const now = Math.floor(Date.now() / 1000);
    const batch = newBatchObject({
      id: "batch_000000000000000000000001",
      endpoint: "/v1/completions",
      completion_window: "1s",
      inputFileId: "file-x",
      created: now - 10,
      windowSeconds: 1,
      validation: { ok: true, total: 3, errors: [], errorCount: 0, model: "m" },
      registry: singleModelRegistry("/models/m.gguf", false),
    });
    await batches.insert({ batch, owner: null, inputKey: "k", shards: [{ byteStart: 0, byteEnd: 1, total: 3 }] });
    await batches.update(batch.id, ["validating"], (r) => transition(r.batch, "in_progress", now));
    disk.hold();
    const cancel = batches.update(batch.id, ["validating", "in_progress"], (r) => {
      if (r.stopReason) return false;
      transition(r.batch, "cancelling", now);
      r.stopReason = "cancelled";
    });
    // The deadline passed while the cancel's record is being written.
    const expiry = batches.expireDue(now + 5);
    await new Promise((r) => setTimeout(r, 20));
    disk.release();
    expect(await cancel).toBeDefined();
    expect(await expiry).toEqual([]);
    const row = (await batches.get(batch.id))!;
    expect(row.stopReason).toBe("cancelled");
    expect(row.batch.status).toBe("cancelling");
  });
});
