// One process's batch records where a decision meets the disk: a cancel whose change is still being written when
// the deadline passes must win over the expiry (before, the expiry read the batch past the cancel's lock and the
// batch ended cancelled with every unstarted request marked batch_expired).
import { describe, expect, it } from "vitest";
import { transition } from "../../api/control/batch-state.js";
import { newBatchObject } from "../../api/control/batch-object.js";
import { singleModelRegistry } from "../../backends/registry.js";
import { MemoryBatchRecords } from "../../cluster/memory/batches.js";
import { type BatchEntry, MemoryState, type StateStore } from "../../cluster/memory/state.js";

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
