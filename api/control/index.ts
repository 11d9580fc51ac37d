// The embedded control plane: the cluster domain (batch service, workers, maintenance) in one process, its state
// kept in BATCH_DIR's layout (<batch_id>/batch.json, files/<file_id>.json) and read back at start, shards run in
// place (a batch's results appended to <batch_id>/output.jsonl and errors.jsonl, every line written counting at
// once), and the simulated spot and dedicated pools as its workers.
import type pino from "pino";
import type { ModelRouter } from "../../backends/router.js";
import { type ClusterPlane, createClusterPlane } from "../../cluster/index.js";
import { memoryPorts, openStateFiles } from "../../cluster/memory/index.js";
import { unixNow } from "../clock.js";
import type { Config } from "../config.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import { FsBlobStore } from "../stores/fs-blob-store.js";

/** How long close() lets running batches settle when the workers were not drained first. */
const CLOSE_GRACE_MS = 10_000;

export type ControlPlane = Omit<ClusterPlane, "close"> & {
  /** Drains the workers (if not drained yet), then lets go of the state. */
  close(opts?: { graceMs: number }): Promise<void>;
};

export async function createControlPlane(deps: {
  config: Config;
  models: ModelRouter;
  logger: pino.Logger;
  metrics?: BatchMetrics;
}): Promise<ControlPlane> {
  const { config, models, logger, metrics } = deps;
  const state = await openStateFiles(config.batchDir, logger);
  const blobs = new FsBlobStore(config.batchDir);
  const ports = memoryPorts({ state, blobs, expirySeconds: config.fileExpirySeconds, now: unixNow });
  // The simulated pools run the local models; upstream models need no GPU slot here (their servers have their
  // own), so one more worker outside the pools runs every batch of theirs at once, bounded by the queue.
  const names = (kind: string) => models.registry.models.filter((m) => m.backend.kind === kind).map((m) => m.name);
  const [local, upstream] = [names("local"), names("upstream")];
  const workers = [
    ...(local.length === 0
      ? []
      : (["spot", "dedicated"] as const)
          .filter((p) => config.pools[p].capacity > 0)
          .map((p) => ({ id: p, pool: p, capacity: config.pools[p].capacity, serves: local }))),
    ...(upstream.length === 0 ? [] : [{ id: "upstream", pool: null, capacity: config.maxQueueDepth, serves: upstream }]),
  ];
  // A batch is one shard: it runs on one pool slot, its files in its own folder, as one machine has always run it.
  const oneShard = { ...config, cluster: { ...config.cluster, shardSize: Number.MAX_SAFE_INTEGER } };
  const plane = await createClusterPlane({
    config: oneShard,
    models,
    logger,
    ports,
    blobs,
    runs: "in-place",
    ownInput: true,
    workers,
    metrics,
  });
  return { ...plane, close: (opts = { graceMs: CLOSE_GRACE_MS }) => plane.close(opts) };
}
