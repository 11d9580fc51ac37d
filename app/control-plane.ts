// The control plane, built in one place for both modes over a PlaneState (plane-state.ts builds one per mode), the
// one thing that differs:
// - embedded (no DATABASE_URL): each batch one shard run in place (results appended to <batch_id>/output.jsonl and
//   errors.jsonl, every line written counting at once), the simulated spot and dedicated pools as its workers;
// - distributed: shards run as parts uploaded at checkpoints, and by ROLE the API's batch service, a worker, or
//   both. Every process competes for the maintenance's lease whatever its role.

import os from "node:os";
import path from "node:path";
import type pino from "pino";
import type { ModelRouter } from "../backends/router.js";
import { ClusterBatchService } from "../batches/batch-service.js";
import { ClusterBatchViews } from "../batches/batch-views.js";
import { meteredQueue } from "../batches/engine-meter.js";
import { InPlaceShardRun } from "../batches/in-place-run.js";
import { Maintenance } from "../batches/maintenance.js";
import { ServedModels } from "../batches/served-models.js";
import { ShardRun, type ShardRunDeps, type StartShardRun } from "../batches/shard-run.js";
import { ClusterStatus } from "../batches/status.js";
import { StopWatch } from "../batches/stop-watch.js";
import type { WebhookTargets } from "../batches/webhooks.js";
import { ClusterWorker } from "../batches/worker.js";
import { type Config, webhookEndpoints } from "../config/config.js";
import { KeyRing } from "../config/keys.js";
import { DatasetBatchService } from "../dataset-jobs/jobs.js";
import { unixNow } from "../domain/clock.js";
import type { SyncInference, SyncTargets } from "../domain/sync-inference.js";
import type { LaneMetrics } from "../metrics/lane-metrics.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import type { FileRecords } from "../state/ports.js";
import type { BlobStore } from "../stores/blob-store.js";
import { FsBlobStore } from "../stores/fs-blob-store.js";
import { ScratchSpace, type StorageState } from "../stores/scratch.js";
import { SyncLanes } from "../sync/lanes.js";
import { WorkerTargets } from "../sync/targets.js";
import { ClusterOrganization } from "../tenancy/organization.js";
import { StorageQuota } from "../tenancy/storage-quota.js";
import { SyncAccounts } from "../tenancy/sync-accounts.js";
import { BlobUploads } from "../uploads/uploads.js";
import type { PlaneState } from "./plane-state.js";

export interface ControlPlane {
  files: FileRecords;
  uploads: BlobUploads;
  batches: ClusterBatchService;
  /** The console's views of batches (inspect, search). */
  views: ClusterBatchViews;
  /** Dataset jobs: a dataset made into a batch, and the ended batch back into the dataset. */
  datasets: DatasetBatchService;
  /** Usage, costs and keys, for admin keys. */
  organization: ClusterOrganization;
  status: ClusterStatus;
  /** Synchronous requests on this process's models, beside the batches (absent with ROLE=api: it runs no model). */
  inference?: SyncInference;
  /** With ROLE=api: the workers synchronous requests are sent to. */
  syncTargets?: SyncTargets;
  /** The first of the workers this process runs; absent with ROLE=api. */
  worker?: ClusterWorker;
  maintenance: Maintenance;
  /** Stops the workers: requests in flight get graceMs, then running shards checkpoint and go back to the queue. */
  drain(opts: { graceMs: number }): Promise<void>;
  /** Drains the workers (if not drained yet), then lets go of the lease and the state. */
  close(opts?: { graceMs: number }): Promise<void>;
  /** Resolves while the state and the blob store answer; throws database_unavailable or storage_unavailable. */
  ping(): Promise<void>;
  /**
   * This process listens at `url`: its workers tell API servers to send synchronous requests there (WORKER_URL,
   * where set, wins). Called once the server listens; a process with no worker ignores it.
   */
  advertise(url: string): void;
  /** The cluster's running totals, from the state (state/totals.ts). */
  totals(): Promise<Record<string, number>>;
  /** The disk under BATCH_DIR as this process last found it (`full` or `read_only`: reads only). */
  storage(): StorageState;
  /** A write failed: a full or read-only disk turns `storage()` at once (see stores/scratch.ts). */
  storageFault(err: unknown): void;
}

/** This process's name: WORKER_ID, else host and pid (scratch space, leases, the metrics' `process` label). */
export const processId = (config: Pick<Config, "cluster">) => config.cluster.workerId || `${os.hostname()}-${process.pid}`;

/** An API server given neither MODEL_PATH nor MODELS_FILE: it names batches by the models its live workers serve. */
export const followsWorkers = (config: Pick<Config, "cluster" | "modelPath" | "modelsFile">) =>
  config.cluster.role === "api" && !config.modelPath && !config.modelsFile;

/** How long close() lets running batches settle when the workers were not drained first. */
const CLOSE_GRACE_MS = 10_000;

/** Each owner's webhook endpoint: its API key's (the keys file, WEBHOOKS_BY_KEY), else the deployment's; undefined: none at all. */
function webhookTargets(config: Config): WebhookTargets | undefined {
  const { deployment, byOwner } = webhookEndpoints(config);
  if (!deployment && byOwner.size === 0) return undefined;
  return (owner) => (owner !== null && byOwner.get(owner)) || deployment;
}

function shardRuns(kind: "parts" | "in-place", deps: ShardRunDeps & { blobs: BlobStore }): StartShardRun {
  if (kind === "parts") return (shard) => new ShardRun(deps, shard);
  if (!(deps.blobs instanceof FsBlobStore)) throw new Error("in-place shard runs need a local folder for the blob store");
  const local = { ...deps, blobs: deps.blobs, active: new Map<string, Promise<unknown>>() };
  return (shard) => new InPlaceShardRun(local, shard);
}

/** The batch service, the status, the maintenance and this process's workers over `state`. */
export async function buildControlPlane(deps: {
  config: Config;
  models: ModelRouter;
  logger: pino.Logger;
  state: PlaneState;
  metrics?: BatchMetrics & LaneMetrics;
  now?: () => number;
}): Promise<ControlPlane> {
  const { config, models, metrics, state } = deps;
  const { ports, blobs } = state;
  const { cluster } = config;
  const now = deps.now ?? unixNow;
  const logger = deps.logger.child({ component: "cluster" });
  const id = processId(config);
  const scratchDir = path.join(config.batchDir, "scratch", id.replace(/[^A-Za-z0-9_.-]/g, "_"));
  const { batches, queue, workers, events: bus } = ports;
  const webhooks = webhookTargets(config);
  const keys = new KeyRing(config.keys);
  // Every file stored for a key, whatever made it, is held to the key's storage bound, and so are its uploads' parts.
  const quota = new StorageQuota({ files: ports.files, limitOf: (owner) => keys.of(owner)?.fileStorageBytes });
  const files = quota.guard(ports.files);
  // A killed process's scratch folder goes once it is stale: a few leases untouched, and never under a minute.
  const scratch = new ScratchSpace({
    root: path.dirname(scratchDir),
    own: scratchDir,
    staleSeconds: Math.max(60, 4 * cluster.leaseSeconds),
    logger,
  });
  const newRun = shardRuns(state.runs ?? "parts", {
    queue: meteredQueue(queue, metrics, models.registry),
    blobs,
    scratchDir,
    checkpointSeconds: cluster.checkpointSeconds,
    leaseSeconds: cluster.leaseSeconds,
    batchSize: config.pipeline.batchSize,
    concurrency: config.pipeline.concurrency,
    order: config.pipeline.order,
    logger,
    onStorageFault: (err) => scratch.noteFault(err),
  });
  // The distributed mode names batches by what the live workers serve; an API server with no models of its own
  // takes theirs.
  const served = cluster.databaseUrl
    ? new ServedModels({
        registry: models.registry,
        followWorkers: followsWorkers(config),
        workers,
        leaseSeconds: cluster.leaseSeconds,
        logger,
      })
    : undefined;
  await served?.start();
  const service = new ClusterBatchService({
    limits: {
      maxQueueDepth: config.maxQueueDepth,
      maxRequestsPerBatch: config.maxRequestsPerBatch,
      maxLineBytes: config.maxLineBytes,
      shardSize: state.shardSize ?? cluster.shardSize,
    },
    events: bus,
    batches,
    queue,
    files,
    blobs,
    registry: models.registry,
    served,
    scratchDir,
    logger,
    now,
    metrics,
    ownInput: state.ownInput,
    webhooks,
    keys,
    countTokens: (model, text) => models.countTokens(model, text),
  });
  const datasets = new DatasetBatchService({
    files,
    batches: service,
    scratchDir: path.join(scratchDir, "datasets"),
    logger,
    limits: config.datasets,
    sizes: { maxLineBytes: config.maxLineBytes, maxFileBytes: config.maxFileBytes },
  });
  const organization = new ClusterOrganization({ batches, keys, registry: models.registry, now });
  const inference: SyncInference | undefined =
    cluster.role === "api"
      ? undefined
      : new SyncLanes(models, config.lanes, {
          accounts: new SyncAccounts({
            batches,
            limitOf: (owner, model) => keys.limitOf(owner, model),
            now,
            onError: (err) => logger.warn({ err }, "synchronous requests' usage not written yet; retrying"),
          }),
          countTokens: (model, text) => models.countTokens(model, text),
          metrics,
          atRisk: (model) => maintenance.modelAtRisk(model),
          logger,
          cacheScope: (owner) => keys.cacheScopeOf(owner),
        });
  const views = new ClusterBatchViews({
    batches,
    queue,
    files,
    blobs,
    registry: models.registry,
    now,
    keyIdOf: (owner) => keys.idOf(owner),
  });
  const uploads = new BlobUploads({
    blobs,
    // Its parts were counted as they came: completing them into a file adds nothing.
    files: ports.files,
    quota,
    scratchDir: path.join(scratchDir, "uploads"),
    maxFileBytes: config.maxFileBytes,
    now,
  });
  const status = new ClusterStatus({
    workers,
    events: bus,
    maxQueueDepth: config.maxQueueDepth,
    leaseSeconds: cluster.leaseSeconds,
    preemptCooldownSeconds: config.pools.spot.preemptCooldownSeconds,
    listWorkers: state.workers === undefined,
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
    webhooks,
    webhookRetrySeconds: config.webhooks.retrySeconds,
    uploads,
    workers,
    workerRetentionSeconds: cluster.workerRetentionSeconds,
    ...(config.slaYield ? { sla: { urgentSeconds: config.slaUrgentSeconds, yieldGraceMs: config.shutdownGraceSeconds * 1000 } } : {}),
    reads: queue,
    logger,
    now,
    metrics,
  });
  const stops = new StopWatch({
    batches,
    events: bus,
    registry: models.registry,
    defaults: (owner) => keys.of(owner)?.stopRules ?? {},
    metrics,
    logger,
  });
  const specs = state.workers ?? (cluster.role === "api" ? [] : [{ id, pool: cluster.workerPool, capacity: cluster.workerCapacity }]);
  // Only a process that answers synchronous requests (not ROLE=api) is named to the API servers.
  let advertised: string | null = cluster.workerUrl || null;
  const pool = specs.map(
    (w) =>
      new ClusterWorker({
        id: w.id,
        pool: w.pool,
        capacity: w.capacity,
        serves: w.serves,
        url: () => advertised,
        queue,
        batches,
        workers,
        events: bus,
        models,
        newRun,
        leaseSeconds: cluster.leaseSeconds,
        urgentSeconds: config.slaUrgentSeconds,
        weights: keys.weights(),
        cancelGraceSeconds: config.cancelGraceSeconds,
        stops,
        preemptGraceMs: config.shutdownGraceSeconds * 1000,
        preemptions: { perHour: config.pools.spot.preemptionsPerHour, cooldownSeconds: config.pools.spot.preemptCooldownSeconds },
        logger: logger.child({ worker: w.id }),
        now,
        metrics,
        cacheScope: (owner) => keys.cacheScopeOf(owner),
      }),
  );
  const events = ports.subscribe((e) => {
    for (const w of pool) w.onEvent(e);
    if ((e.type === "shard_done" || e.type === "stop") && maintenance.leader) void maintenance.tick();
  });
  await scratch.start();
  await maintenance.start();
  for (const w of pool) await w.start();
  logger.info(
    {
      mode: cluster.databaseUrl ? "distributed" : "embedded",
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
    uploads,
    batches: service,
    views,
    datasets,
    organization,
    status,
    inference,
    syncTargets:
      cluster.role === "api" ? new WorkerTargets({ registry: models.registry, workers, leaseSeconds: cluster.leaseSeconds }) : undefined,
    worker: pool[0],
    maintenance,
    drain,
    advertise(url) {
      if (cluster.workerUrl) return;
      advertised = url;
      for (const w of pool) void w.announce();
    },
    async ping() {
      await ports.ping();
      await blobs.ping();
    },
    totals: () => batches.totals(),
    storage: () => scratch.state,
    storageFault: (err) => void scratch.noteFault(err),
    close(opts = { graceMs: CLOSE_GRACE_MS }) {
      closed ??= (async () => {
        served?.close();
        await inference?.close?.();
        await drain(opts);
        datasets.close();
        stops.close();
        await maintenance.close();
        await events.close();
        await ports.close();
        blobs.close?.();
        await scratch.close();
      })();
      return closed;
    },
  };
}
