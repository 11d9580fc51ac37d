// Where the control plane keeps its state, one builder per mode: one process's BATCH_DIR (its state files, the
// simulated pools as workers, a batch as one shard run in place), or the distributed mode's PostgreSQL and blob store
// (S3 when S3_BUCKET is set, else BATCH_DIR as a shared folder); and the schema's migrations, run apart.
import type pino from "pino";
import type { ModelRouter } from "../backends/router.js";
import type { Config } from "../config/config.js";
import { unixNow } from "../domain/clock.js";
import { memoryPorts, openStateFiles } from "../embedded/index.js";
import type { ClusterPorts } from "../state/ports.js";
import type { BlobStore } from "../stores/blob-store.js";
import { FsBlobStore } from "../stores/fs-blob-store.js";

export type WorkerSpec = { id: string; pool: "spot" | "dedicated" | null; capacity: number; serves?: string[] };

/** Where the control plane keeps its state, and how its shards keep their results. */
export interface PlaneState {
  ports: ClusterPorts;
  blobs: BlobStore & { close?(): void };
  /**
   * As parts uploaded at checkpoints (any blob store, any number of processes), or "in-place", appended to files
   * of a local folder that one process owns (every line written counts at once).
   */
  runs?: "parts" | "in-place";
  /** Each batch keeps its own copy of its input in its folder (ClusterBatchServiceDeps.ownInput). */
  ownInput?: boolean;
  /** Requests per shard (default SHARD_SIZE). */
  shardSize?: number;
  /** The workers this process runs (default: the one ROLE and WORKER_* describe). */
  workers?: WorkerSpec[];
}

/**
 * Applies the schema's migrations and lets go (`main --migrate`, the migration job), or with `downTo` reverts
 * those newer than it (`main --migrate-down <version>`).
 */
export async function migrateSchema(url: string, logger: pino.Logger, downTo?: string): Promise<string[]> {
  const { createPool, migrate, migrateDown } = await import("../postgres/db.js");
  const pool = createPool(url, logger, 1);
  try {
    return downTo === undefined ? await migrate(pool, logger) : await migrateDown(pool, logger, downTo);
  } finally {
    await pool.end();
  }
}

/** One process owns BATCH_DIR: its state files, the simulated pools as workers, a batch as one shard run in place. */
export async function embeddedState(config: Config, models: ModelRouter, logger: pino.Logger): Promise<PlaneState> {
  const state = await openStateFiles(config.batchDir, logger);
  const blobs = new FsBlobStore(config.batchDir);
  const ports = memoryPorts({ state, blobs, expirySeconds: config.fileExpirySeconds, now: unixNow });
  // The simulated pools run the local models; upstream models need no GPU slot here (their servers have their
  // own), so one more worker outside the pools runs every batch of theirs at once, bounded by the queue.
  const names = (kind: string) => models.registry.models.filter((m) => m.backend.kind === kind).map((m) => m.name);
  const [local, upstream] = [names("local"), names("upstream")];
  const workers: WorkerSpec[] = [
    ...(local.length === 0
      ? []
      : (["spot", "dedicated"] as const)
          .filter((p) => config.pools[p].capacity > 0)
          .map((p) => ({ id: p, pool: p, capacity: config.pools[p].capacity, serves: local }))),
    ...(upstream.length === 0 ? [] : [{ id: "upstream", pool: null, capacity: config.maxQueueDepth, serves: upstream }]),
  ];
  // A batch is one shard: it runs on one pool slot, its files in its own folder, as one machine has always run it.
  return { ports, blobs, runs: "in-place", ownInput: true, shardSize: Number.MAX_SAFE_INTEGER, workers };
}

/** The blob store the settings name; S3's client is imported only where S3 is (it is a tenth of a second of a start). */
export async function blobStoreFor(config: Config): Promise<BlobStore & { close?(): void; ensureBucket?(): Promise<string> }> {
  const { s3 } = config;
  if (!s3.bucket) return new FsBlobStore(config.batchDir);
  const { S3BlobStore } = await import("../stores/s3-blob-store.js");
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

/**
 * The distributed mode's shared state: PostgreSQL at DATABASE_URL and the blob store, each checked usable at start
 * (one clear error otherwise).
 */
export async function openSharedState(config: Config, logger: pino.Logger, now: () => number = unixNow): Promise<PlaneState> {
  const blobs = await blobStoreFor(config);
  // Imported here, as S3's client is: the embedded mode, the default, never loads PostgreSQL's.
  const { openPgPorts } = await import("../postgres/index.js");
  const ports = await openPgPorts({
    url: config.cluster.databaseUrl,
    blobs,
    expirySeconds: config.fileExpirySeconds,
    now,
    poolSize: 10 + config.cluster.workerCapacity,
    logger,
    migrate: config.cluster.migrate,
  });
  const bucket = await blobs.ensureBucket?.().catch(async (err) => {
    await ports.close();
    throw new Error(`S3 storage at ${config.s3.endpoint || "AWS"} (bucket ${config.s3.bucket}) is unusable: ${(err as Error).message}`);
  });
  if (bucket === "created") logger.info({ bucket: config.s3.bucket }, "created the S3 bucket");
  return { ports, blobs };
}
