// Composition of the control plane: stores loaded from BATCH_DIR, queue, simulated pool scheduler,
// job runner and worker, with recovery of whatever was unfinished when the service last stopped.
import type pino from "pino";
import type { ModelRouter } from "../../backends/router.js";
import { unixNow } from "../clock.js";
import type { Config } from "../config.js";
import type { PoolStatus, QueueStats } from "../contracts.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import { BatchStore } from "../stores/batch-store.js";
import { Collector, removeCrashLeftovers } from "./collector.js";
import { DiskFileStore } from "../stores/file-store.js";
import { FsBlobStore } from "../stores/fs-blob-store.js";
import { QueueingBatchService } from "./batch-service.js";
import { DeadlineTimers } from "./deadline-timers.js";
import { JobQueue } from "./job-queue.js";
import { JobRunner } from "./job-runner.js";
import { PoolScheduler } from "./pool-scheduler.js";
import { randomPreemptions } from "./preemptions.js";
import { recoverBatches } from "./recovery.js";
import { Worker } from "./worker.js";

/** Sent as Retry-After with a 429 when the queue is full. */
export const QUEUE_FULL_RETRY_AFTER_SECONDS = 30;
/** How long close() lets running jobs settle when worker.close() was not called first. */
const CLOSE_GRACE_MS = 10_000;

export interface ControlPlane {
  files: DiskFileStore;
  batches: QueueingBatchService;
  status: EmbeddedStatus;
  worker: Worker;
  /** Housekeeping of expired files and batch folders (runs on its own; exposed for tests and tools). */
  collector: Collector;
  /** Stops the worker (if not stopped yet) and deadline timers, then flushes state to disk. */
  close(): Promise<void>;
}

/** ControlPlaneStatus, answered at once from this process's own state. */
export interface EmbeddedStatus {
  queueStats(): QueueStats;
  poolStatus(): PoolStatus[];
  preemptSpot(): { preempted: string[]; cooldown_seconds: number };
}

export async function createControlPlane(deps: {
  config: Config;
  models: ModelRouter;
  logger: pino.Logger;
  metrics?: BatchMetrics;
}): Promise<ControlPlane> {
  const { config, models, metrics } = deps;
  const logger = deps.logger.child({ component: "control" });
  const now = unixNow;

  const store = await BatchStore.open({ batchDir: config.batchDir, logger });
  const files = await DiskFileStore.open({
    batchDir: config.batchDir,
    blobs: new FsBlobStore(config.batchDir),
    expirySeconds: config.fileExpirySeconds,
    logger,
    onDeleted: (id) => store.forgetFile(id),
  });
  const queue = new JobQueue({
    maxDepth: config.maxQueueDepth,
    urgentSeconds: config.slaUrgentSeconds,
    retryAfterSeconds: QUEUE_FULL_RETRY_AFTER_SECONDS,
  });
  const scheduler = new PoolScheduler(config.pools, deps.logger.child({ component: "scheduler" }));
  const deadlines = new DeadlineTimers();
  const runner = new JobRunner({ config, models, store, files, deadlines, scheduler, logger, now, metrics });
  const worker = new Worker({
    queue,
    scheduler,
    runJob: runner.run,
    logger: deps.logger.child({ component: "worker" }),
    urgentSeconds: config.slaUrgentSeconds,
    now,
    requeue: (job) => {
      const rec = store.get(job.batchId);
      if (rec) batches.schedule(rec, { resumed: true });
    },
    runsUpstream: (job) => models.registry.resolve(job.model)?.backend.kind === "upstream",
    isLoaded: (job) => models.isLoaded(models.registry.resolve(job.model)?.name ?? ""),
  });
  const batches = new QueueingBatchService({
    config,
    store,
    files,
    queue,
    worker,
    runner,
    deadlines,
    registry: models.registry,
    logger,
    now,
    metrics,
  });

  await removeCrashLeftovers({ batchDir: config.batchDir, files, logger });
  await recoverBatches({ store, runner, batches, logger, now });
  worker.start();
  const collector = new Collector({
    batchDir: config.batchDir,
    files,
    store,
    expirySeconds: config.fileExpirySeconds,
    busy: (id) => worker.isRunning(id) || runner.isEnding(id),
    logger,
    now,
  });
  collector.start(config.collectIntervalSeconds);
  const status: EmbeddedStatus = {
    queueStats: () => worker.stats(),
    poolStatus: () => scheduler.status(),
    preemptSpot: () => ({
      preempted: worker.preempt("spot", {
        graceMs: config.shutdownGraceSeconds * 1000,
        cooldownMs: config.pools.spot.preemptCooldownSeconds * 1000,
      }),
      cooldown_seconds: config.pools.spot.preemptCooldownSeconds,
    }),
  };
  const preemptions = randomPreemptions(config.pools.spot.preemptionsPerHour, () => status.preemptSpot());
  logger.info({ batches: store.all().length, queued: queue.depth, pools: scheduler.status() }, "control plane ready");

  let closed: Promise<void> | undefined;
  return {
    files,
    batches,
    status,
    worker,
    collector,
    close() {
      closed ??= (async () => {
        preemptions.stop();
        await collector.stop();
        deadlines.clearAll();
        await worker.close({ graceMs: CLOSE_GRACE_MS });
        await store.close();
      })();
      return closed;
    },
  };
}
