// The distributed mode's ports in one process's memory: the whole domain (batch service, workers, shard runs,
// maintenance, finalizing) runs on them without a database, each part seeing what PostgreSQL would show it.
import type pino from "pino";
import type { ClusterPorts } from "../state/ports.js";
import type { BlobStore } from "../stores/blob-store.js";
import { isStorageFull } from "../stores/errors.js";
import { MemoryBatchRecords } from "./batches.js";
import { MemoryEventBus, MemoryLeaderLock } from "./events.js";
import { MemoryFileRecords } from "./files.js";
import { MemoryWorkQueue } from "./shards.js";
import { MemoryState } from "./state.js";
import { removeCrashLeftovers, StateFiles } from "./state-files.js";
import { MemoryWorkerRegistry } from "./workers.js";

export { MemoryState };

/**
 * The state kept durably as documents under `dir`, read back as it was. Whoever opens it must hold the folder
 * alone (one server per BATCH_DIR): the leases found were held by a process that is gone, so their shards go back
 * to the queue at once, under a new epoch.
 */
export async function openStateFiles(dir: string, logger: pino.Logger, clock: () => number = Date.now): Promise<MemoryState> {
  const files = new StateFiles(dir, logger);
  await files.open();
  const state = new MemoryState(clock, files);
  await files.load(state);
  const removed = await removeCrashLeftovers(dir, state);
  if (removed.length > 0)
    logger.warn({ count: removed.length, removed: removed.slice(0, 20) }, "removed what an earlier crash left half-written");
  const requeued = state.requeue(() => true);
  // On a full disk the new epochs wait for space (the next start would requeue these shards the same way): the
  // process starts to serve reads, and its first write that finds space saves them.
  await state.savedBatch(...requeued).catch((err) => {
    if (!isStorageFull(err)) throw err;
    logger.warn({ err, batches: requeued }, "the disk is full: the requeued batches' records are saved once it has space");
    state.saveSoon(...requeued);
  });
  return state;
}

export function memoryPorts(deps: {
  state: MemoryState;
  blobs: BlobStore;
  expirySeconds: number;
  /** Unix seconds. */
  now: () => number;
}): ClusterPorts {
  const { state } = deps;
  const events = new MemoryEventBus(state);
  const batches = new MemoryBatchRecords(state);
  const queue = new MemoryWorkQueue(state);
  const files = new MemoryFileRecords(state, deps);
  return {
    batches,
    queue,
    files,
    workers: new MemoryWorkerRegistry(state),
    events,
    subscribe: (onEvent) => events.subscribe(onEvent),
    // One process: its holder cannot freeze apart from the state, so its writes need no fence.
    maintenance: () => ({ lock: new MemoryLeaderLock(state), batches, queue, files }),
    // The state is this process's own memory: it answers whenever the process does.
    ping: async () => undefined,
    close: () => state.flush(),
  };
}
