// The distributed mode's ports in one process's memory: the whole domain (batch service, workers, shard runs,
// maintenance, finalizing) runs on them without a database, each part seeing what PostgreSQL would show it.
import type { BlobStore } from "../../api/contracts.js";
import type { ClusterPorts } from "../ports.js";
import { MemoryBatchRecords } from "./batches.js";
import { MemoryEventBus, MemoryLeaderLock } from "./events.js";
import { MemoryFileRecords } from "./files.js";
import { MemoryWorkQueue } from "./shards.js";
import { MemoryState } from "./state.js";
import { MemoryWorkerRegistry } from "./workers.js";

export { MemoryState };

export function memoryPorts(deps: {
  state: MemoryState;
  blobs: BlobStore;
  expirySeconds: number;
  /** Unix seconds. */
  now: () => number;
}): ClusterPorts {
  const { state } = deps;
  const events = new MemoryEventBus(state);
  return {
    batches: new MemoryBatchRecords(state),
    queue: new MemoryWorkQueue(state),
    files: new MemoryFileRecords(state, deps),
    workers: new MemoryWorkerRegistry(state),
    events,
    subscribe: (onEvent) => events.subscribe(onEvent),
    maintenanceLock: () => new MemoryLeaderLock(state),
    close: async () => undefined,
  };
}
