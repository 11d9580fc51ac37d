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

type PlaneDeps = {
  config: Config;
  models: ModelRouter;
  logger: pino.Logger;
  state: PlaneState;
  metrics?: BatchMetrics & LaneMetrics;
  now?: () => number;
};

/** What the plane's parts share: the settings, the state, this process's scratch space, the keys and their quota. */
interface PlaneBase {
  config: Config;
  models: ModelRouter;
  state: PlaneState;
  metrics?: BatchMetrics & LaneMetrics;
  logger: pino.Logger;
  now: () => number;
  id: string;
  scratchDir: string;
  scratch: ScratchSpace;
  keys: KeyRing;
  quota: StorageQuota;
  /** The state's file records behind the quota. */
  files: FileRecords;
  webhooks?: WebhookTargets;
  newRun: StartShardRun;
}

function planeBase(deps: PlaneDeps): PlaneBase {
  const { config, models, metrics, state } = deps;
  const { cluster } = config;
  const logger = deps.logger.child({ component: "cluster" });
  const id = processId(config);
  const scratchDir = path.join(config.batchDir, "scratch", id.replace(/[^A-Za-z0-9_.-]/g, "_"));
  const keys = new KeyRing(config.keys);
  // Every file stored for a key, whatever made it, is held to the key's storage bound, and so are its uploads' parts.
  const quota = new StorageQuota({ files: state.ports.files, limitOf: (owner) => keys.of(owner)?.fileStorageBytes });
  // A killed process's scratch folder goes once it is stale: a few leases untouched, and never under a minute.
  const scratch = new ScratchSpace({
    root: path.dirname(scratchDir),
    own: scratchDir,
    staleSeconds: Math.max(60, 4 * cluster.leaseSeconds),
    logger,
  });
  const newRun = shardRuns(state.runs ?? "parts", {
    queue: meteredQueue(state.ports.queue, metrics, models.registry),
    blobs: state.blobs,
    scratchDir,
    checkpointSeconds: cluster.checkpointSeconds,
    leaseSeconds: cluster.leaseSeconds,
    batchSize: config.pipeline.batchSize,
    concurrency: config.pipeline.concurrency,
    order: config.pipeline.order,
    logger,
    onStorageFault: (err) => scratch.noteFault(err),
  });
  const webhooks = webhookTargets(config);
  const files = quota.guard(state.ports.files);
  return {
    config,
    models,
    state,
    metrics,
    logger,
    now: deps.now ?? unixNow,
    id,
    scratchDir,
    scratch,
    keys,
    quota,
    files,
    webhooks,
    newRun,
  };
}

/**
 * The distributed mode names batches by what the live workers serve; an API server with no models of its own takes
 * theirs. The embedded mode has none.
 */
async function servedModels(base: PlaneBase): Promise<ServedModels | undefined> {
  const { cluster } = base.config;
  if (!cluster.databaseUrl) return undefined;
  const served = new ServedModels({
    registry: base.models.registry,
    followWorkers: followsWorkers(base.config),
    workers: base.state.ports.workers,
    leaseSeconds: cluster.leaseSeconds,
    logger: base.logger,
  });
  await served.start();
  return served;
}

/** What a client's batch requests reach: the batch service, dataset jobs over it, usage and the console's views. */
function batchServices(base: PlaneBase, served: ServedModels | undefined) {
  const { config, models, state, logger, now, metrics, keys, files, scratchDir } = base;
  const { batches, queue, events } = state.ports;
  const service = new ClusterBatchService({
    limits: {
      maxQueueDepth: config.maxQueueDepth,
      maxRequestsPerBatch: config.maxRequestsPerBatch,
      maxLineBytes: config.maxLineBytes,
      shardSize: state.shardSize ?? config.cluster.shardSize,
    },
    events,
    batches,
    queue,
    files,
    blobs: state.blobs,
    registry: models.registry,
    served,
    scratchDir,
    logger,
    now,
    metrics,
    ownInput: state.ownInput,
    webhooks: base.webhooks,
    keys,
    countTokens: (model, text) => models.countTokens(model, text),
    planning: {
      backendOf: (name) => models.backends().find((b) => b.name === name)?.backend,
      cacheOn: config.resultCache.enabled,
      cacheScopeOf: (owner) => keys.cacheScopeOf(owner),
    },
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
  const views = new ClusterBatchViews({
    batches,
    queue,
    files,
    blobs: state.blobs,
    registry: models.registry,
    now,
    keyIdOf: (owner) => keys.idOf(owner),
  });
  return { service, datasets, organization, views };
}

/** Synchronous requests on this process's models, held to each key's limits; an API server (ROLE=api) runs none. */
function syncInference(base: PlaneBase, atRisk: (model: string) => boolean): SyncInference | undefined {
  const { config, models, logger, now, keys } = base;
  if (config.cluster.role === "api") return undefined;
  return new SyncLanes(models, config.lanes, {
    accounts: new SyncAccounts({
      batches: base.state.ports.batches,
      limitOf: (owner, model) => keys.limitOf(owner, model),
      now,
      onError: (err) => logger.warn({ err }, "synchronous requests' usage not written yet; retrying"),
    }),
    countTokens: (model, text) => models.countTokens(model, text),
    metrics: base.metrics,
    atRisk,
    logger,
    cacheScope: (owner) => keys.cacheScopeOf(owner),
  });
}

function blobUploads(base: PlaneBase): BlobUploads {
  return new BlobUploads({
    blobs: base.state.blobs,
    // Its parts were counted as they came: completing them into a file adds nothing.
    files: base.state.ports.files,
    quota: base.quota,
    scratchDir: path.join(base.scratchDir, "uploads"),
    maxFileBytes: base.config.maxFileBytes,
    now: base.now,
  });
}

function clusterStatus({ config, state }: PlaneBase): ClusterStatus {
  return new ClusterStatus({
    workers: state.ports.workers,
    events: state.ports.events,
    maxQueueDepth: config.maxQueueDepth,
    leaseSeconds: config.cluster.leaseSeconds,
    preemptCooldownSeconds: config.pools.spot.preemptCooldownSeconds,
    listWorkers: state.workers === undefined,
  });
}

/** The cluster's housekeeping under one lease: expiry, webhooks, uploads, stale workers, SLA yields. */
function maintenanceOf(base: PlaneBase, uploads: BlobUploads): Maintenance {
  const { config, state, id, logger, now, metrics } = base;
  const { cluster } = config;
  const leader = state.ports.maintenance(`maintenance:${id}`, cluster.leaseSeconds);
  return new Maintenance({
    ...leader,
    events: state.ports.events,
    blobs: state.blobs,
    newRun: base.newRun,
    leaseSeconds: cluster.leaseSeconds,
    id: `maintenance:${id}`,
    collectIntervalSeconds: config.collectIntervalSeconds,
    expirySeconds: config.fileExpirySeconds,
    webhooks: base.webhooks,
    webhookRetrySeconds: config.webhooks.retrySeconds,
    uploads,
    workers: state.ports.workers,
    workerRetentionSeconds: cluster.workerRetentionSeconds,
    // One process's workers serve what it serves for its whole life: nothing to wait for, and a worker leaving
    // at a shutdown does not make its models unserved.
    unserved: cluster.databaseUrl
      ? { graceSeconds: cluster.unservedGraceSeconds }
      : { graceSeconds: 0, served: base.models.registry.names },
    ...(config.slaYield ? { sla: { urgentSeconds: config.slaUrgentSeconds, yieldGraceMs: config.shutdownGraceSeconds * 1000 } } : {}),
    reads: state.ports.queue,
    logger,
    now,
    metrics,
  });
}

function stopWatch({ state, models, keys, metrics, logger }: PlaneBase): StopWatch {
  return new StopWatch({
    batches: state.ports.batches,
    events: state.ports.events,
    registry: models.registry,
    defaults: (owner) => keys.of(owner)?.stopRules ?? {},
    metrics,
    logger,
  });
}

/** This process's workers: the state's list where it names them (embedded), else one by the settings, none for ROLE=api. */
function workerSpecs({ config, state, id }: PlaneBase) {
  const { cluster } = config;
  return state.workers ?? (cluster.role === "api" ? [] : [{ id, pool: cluster.workerPool, capacity: cluster.workerCapacity }]);
}

function newWorkers(
  base: PlaneBase,
  specs: ReturnType<typeof workerSpecs>,
  stops: StopWatch,
  advertised: () => string | null,
): ClusterWorker[] {
  const { config, models, state, logger, now, metrics, keys } = base;
  const { queue, batches, workers, events } = state.ports;
  return specs.map(
    (w) =>
      new ClusterWorker({
        id: w.id,
        pool: w.pool,
        capacity: w.capacity,
        serves: w.serves,
        url: advertised,
        queue,
        batches,
        workers,
        events,
        models,
        newRun: base.newRun,
        leaseSeconds: config.cluster.leaseSeconds,
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
}

/** Workers and maintenance hear the state's events; the scratch space, the maintenance and the workers start. */
async function startParts(base: PlaneBase, pool: ClusterWorker[], maintenance: Maintenance, specs: ReturnType<typeof workerSpecs>) {
  const { config, state, scratch, logger } = base;
  const { cluster } = config;
  const events = state.ports.subscribe((e) => {
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
  return events;
}

/** The batch service, the status, the maintenance and this process's workers over `state`. */
export async function buildControlPlane(deps: PlaneDeps): Promise<ControlPlane> {
  const base = planeBase(deps);
  const { config, models, state, scratch, files } = base;
  const { cluster } = config;
  const { ports, blobs } = state;
  const served = await servedModels(base);
  const { service, datasets, organization, views } = batchServices(base, served);
  const inference = syncInference(base, (model) => maintenance.modelAtRisk(model));
  const uploads = blobUploads(base);
  const status = clusterStatus(base);
  const maintenance = maintenanceOf(base, uploads);
  const stops = stopWatch(base);
  const specs = workerSpecs(base);
  // Only a process that answers synchronous requests (not ROLE=api) is named to the API servers.
  let advertised: string | null = cluster.workerUrl || null;
  const pool = newWorkers(base, specs, stops, () => advertised);
  const events = await startParts(base, pool, maintenance, specs);
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
      cluster.role === "api"
        ? new WorkerTargets({ registry: models.registry, workers: ports.workers, leaseSeconds: cluster.leaseSeconds })
        : undefined,
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
    totals: () => ports.batches.totals(),
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
