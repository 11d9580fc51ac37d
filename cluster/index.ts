// Composition of the distributed mode (DATABASE_URL set): PostgreSQL for metadata and the shard queue, the blob
// store (S3 when S3_BUCKET is set, else BATCH_DIR as a shared folder), and by ROLE the API's batch service, a
// worker, or both. Every process competes for the maintenance's lease, so housekeeping runs whatever the roles.
import os from "node:os";
import path from "node:path";
import type pino from "pino";
import type { ModelRouter } from "../backends/router.js";
import type { Config } from "../api/config.js";
import type { BlobStore } from "../api/contracts.js";
import type { BatchMetrics } from "../api/metrics/metrics.js";
import { FsBlobStore } from "../api/stores/fs-blob-store.js";
import { S3BlobStore } from "../api/stores/s3-blob-store.js";
import { ClusterBatchService } from "./batch-service.js";
import { InPlaceShardRun } from "./in-place-run.js";
import { Maintenance } from "./maintenance.js";
import { ShardRun, type ShardRunDeps, type StartShardRun } from "./shard-run.js";
import { openPgPorts } from "./pg/index.js";
import type { ClusterPorts, FileRecords } from "./ports.js";
import { ClusterStatus } from "./status.js";
import { ClusterWorker } from "./worker.js";

export interface ClusterPlane {
  files: FileRecords;
  batches: ClusterBatchService;
  status: ClusterStatus;
  /** Absent with ROLE=api. */
  worker?: ClusterWorker;
  maintenance: Maintenance;
  /** Stops the workers: requests in flight get graceMs, then running shards checkpoint and go back to the queue. */
  drain(opts: { graceMs: number }): Promise<void>;
  /** Drains the workers (if not drained yet), then lets go of the lock and the database. */
  close(opts: { graceMs: number }): Promise<void>;
  /** Resolves while the state and the blob store answer; throws database_unavailable or storage_unavailable. */
  ping(): Promise<void>;
}

export function blobStoreFor(config: Config): BlobStore & { close?(): void; ensureBucket?(): Promise<string> } {
  const { s3 } = config;
  if (!s3.bucket) return new FsBlobStore(config.batchDir);
  return new S3BlobStore({
    bucket: s3.bucket,
    prefix: s3.prefix,
    client: {
      region: s3.region,
      ...(s3.endpoint ? { endpoint: s3.endpoint } : {}),
      forcePathStyle: s3.forcePathStyle,
      ...(s3.accessKeyId ? { credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } } : {}),
    },
  });
}

export interface SharedState {
  ports: ClusterPorts;
  blobs: BlobStore & { close?(): void };
  /**
   * How shards keep their results: as parts uploaded at checkpoints (any blob store, any number of processes), or
   * "in-place", appended to files of a local folder that one process owns (every line written counts at once).
   */
  runs?: "parts" | "in-place";
}

function shardRuns(kind: "parts" | "in-place", deps: ShardRunDeps & { blobs: BlobStore }): StartShardRun {
  if (kind === "parts") return (shard) => new ShardRun(deps, shard);
  if (!(deps.blobs instanceof FsBlobStore)) throw new Error("in-place shard runs need a local folder for the blob store");
  const local = { ...deps, blobs: deps.blobs, active: new Map<string, Promise<unknown>>() };
  return (shard) => new InPlaceShardRun(local, shard);
}

/**
 * The shared state of the distributed mode: PostgreSQL at DATABASE_URL and the blob store, each checked usable
 * at start (one clear error otherwise).
 */
export async function openSharedState(config: Config, logger: pino.Logger, now: () => number): Promise<SharedState> {
  const blobs = blobStoreFor(config);
  const ports = await openPgPorts({
    url: config.cluster.databaseUrl,
    blobs,
    expirySeconds: config.fileExpirySeconds,
    now,
    poolSize: 10 + config.cluster.workerCapacity,
    logger,
  });
  const bucket = await blobs.ensureBucket?.().catch(async (err) => {
    await ports.close();
    throw new Error(`S3 storage at ${config.s3.endpoint || "AWS"} (bucket ${config.s3.bucket}) is unusable: ${(err as Error).message}`);
  });
  if (bucket === "created") logger.info({ bucket: config.s3.bucket }, "created the S3 bucket");
  return { ports, blobs };
}

/** By ROLE, the API's batch service, a worker, or both, with the maintenance, on `ports` and `blobs`. */
export async function createClusterPlane(deps: {
  config: Config;
  models: ModelRouter;
  logger: pino.Logger;
  ports: ClusterPorts;
  blobs: BlobStore & { close?(): void };
  runs?: SharedState["runs"];
  /** Each batch keeps its own copy of its input in its folder (ClusterBatchServiceDeps.ownInput). */
  ownInput?: boolean;
  /** The workers this process runs (by default the one ROLE and WORKER_* describe). */
  workers?: Array<{ id: string; pool: "spot" | "dedicated" | null; capacity: number; serves?: string[] }>;
  metrics?: BatchMetrics;
  now?: () => number;
}): Promise<ClusterPlane> {
  const { config, models, metrics, ports, blobs } = deps;
  const { cluster } = config;
  const now = deps.now ?? (() => Math.floor(Date.now() / 1000));
  const logger = deps.logger.child({ component: "cluster" });
  const id = cluster.workerId || `${os.hostname()}-${process.pid}`;
  const scratchDir = path.join(config.batchDir, "scratch", id.replace(/[^A-Za-z0-9_.-]/g, "_"));
  const { batches, queue, workers, files, events: bus } = ports;
  const newRun = shardRuns(deps.runs ?? "parts", {
    queue,
    blobs,
    scratchDir,
    checkpointSeconds: cluster.checkpointSeconds,
    leaseSeconds: cluster.leaseSeconds,
    batchSize: config.pipeline.batchSize,
    concurrency: config.pipeline.concurrency,
    order: config.pipeline.order,
    logger,
  });
  const service = new ClusterBatchService({
    config,
    events: bus,
    batches,
    queue,
    files,
    blobs,
    registry: models.registry,
    scratchDir,
    logger,
    now,
    metrics,
    ownInput: deps.ownInput,
  });
  const status = new ClusterStatus({
    workers,
    events: bus,
    maxQueueDepth: config.maxQueueDepth,
    leaseSeconds: cluster.leaseSeconds,
    preemptCooldownSeconds: config.pools.spot.preemptCooldownSeconds,
    listWorkers: deps.workers === undefined,
  });
  const leader = ports.maintenance(`maintenance:${id}`, cluster.leaseSeconds);
  const maintenance = new Maintenance({
    ...leader,
    events: bus,
    blobs,
    newRun,
    leaseSeconds: cluster.leaseSeconds,
    id: `maintenance:${id}`,
    collectIntervalSeconds: config.collectIntervalSeconds,
    expirySeconds: config.fileExpirySeconds,
    logger,
    now,
    metrics,
  });
  const specs = deps.workers ?? (cluster.role === "api" ? [] : [{ id, pool: cluster.workerPool, capacity: cluster.workerCapacity }]);
  const pool = specs.map(
    (w) =>
      new ClusterWorker({
        id: w.id,
        pool: w.pool,
        capacity: w.capacity,
        serves: w.serves,
        queue,
        batches,
        workers,
        events: bus,
        models,
        newRun,
        leaseSeconds: cluster.leaseSeconds,
        urgentSeconds: config.slaUrgentSeconds,
        cancelGraceSeconds: config.cancelGraceSeconds,
        preemptGraceMs: config.shutdownGraceSeconds * 1000,
        preemptions: { perHour: config.pools.spot.preemptionsPerHour, cooldownSeconds: config.pools.spot.preemptCooldownSeconds },
        logger: logger.child({ worker: w.id }),
        now,
        metrics,
      }),
  );
  const worker = pool[0];
  const events = ports.subscribe((e) => {
    for (const w of pool) w.onEvent(e);
    if ((e.type === "shard_done" || e.type === "stop") && maintenance.leader) void maintenance.tick();
  });
  await maintenance.start();
  for (const w of pool) await w.start();
  logger.info(
    {
      mode: cluster.databaseUrl ? "distributed" : "one process",
      role: cluster.role,
      workers: specs,
      storage: config.s3.bucket ? "s3" : "folder",
    },
    "control plane ready",
  );
  let closed: Promise<void> | undefined;
  let drained: Promise<void> | undefined;
  const drain = (opts: { graceMs: number }) => {
    service.close();
    drained ??= Promise.all(pool.map((w) => w.close(opts))).then(() => undefined);
    return drained;
  };
  return {
    files,
    batches: service,
    status,
    worker,
    maintenance,
    drain,
    async ping() {
      await ports.ping();
      await blobs.ping();
    },
    close(opts) {
      closed ??= (async () => {
        await drain(opts);
        await maintenance.close();
        await events.close();
        await ports.close();
        blobs.close?.();
      })();
      return closed;
    },
  };
}
