// A worker of the distributed mode: registers as spot or dedicated with a capacity (shards at once), claims shards
// whenever it has room, renews their leases, checkpoints them, and stops them when their batch is cancelled,
// expires or fails, when its spot capacity is reclaimed, or when it shuts down (each handed back after a last
// checkpoint, for another worker to resume).
import type pino from "pino";
import { catalogueOf } from "../backends/registry.js";
import { ModelLoadError, type ModelRouter } from "../backends/router.js";
import { batchCacheOptions, withCacheOptions } from "../cache/caching-backend.js";
import { transition } from "../domain/batch-state.js";
import type { PoolStatus } from "../domain/ports.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import type { AbortReason, Progress } from "../pipeline/types.js";
import { OutageLog } from "../state/outage-log.js";
import {
  type BatchRecords,
  type ClaimedShard,
  type ClusterEvent,
  type EventBus,
  type StopReason,
  shardKey,
  type WorkerRegistry,
  type WorkQueue,
} from "../state/ports.js";
import { randomPreemptions } from "./preemptions.js";
import { CANCELLED, EXPIRED, FAILED, PAUSED, PREEMPTED, SHUTDOWN, STOPPED_WHY, YIELDED } from "./reasons.js";
import { type ShardExecution, ShardFailure, type StartShardRun } from "./shard-run.js";
import type { StopWatch } from "./stop-watch.js";

/**
 * A shard run's progress into /metrics: its first report is where the run starts (what earlier runs did), and each
 * later one adds its growth.
 */
export function progressMeter(metrics: BatchMetrics | undefined, endpoint: string): ((p: Progress) => void) | undefined {
  if (!metrics) return undefined;
  let track: ((p: Progress) => void) | undefined;
  return (p) => {
    if (track) track(p);
    else track = metrics.trackProgress(endpoint, p);
  };
}

const POLL_MS = 1_000;
const RETRY_AFTER_ERROR_MS = 2_000;

export interface ClusterWorkerDeps {
  id: string;
  /** null: a worker outside the simulated pools (one process's upstream models, which need no GPU slot). */
  pool: PoolStatus["name"] | null;
  capacity: number;
  /** The models it serves (by default every model of the registry). */
  serves?: string[];
  /** Where API servers send it synchronous requests (undefined or null: it takes none). */
  url?: () => string | null;
  queue: WorkQueue;
  batches: BatchRecords;
  workers: WorkerRegistry;
  events: EventBus;
  models: ModelRouter;
  newRun: StartShardRun;
  leaseSeconds: number;
  urgentSeconds: number;
  /** The keys' share weights by owner (tenancy/fair-share.ts). */
  weights?: Readonly<Record<string, number>>;
  cancelGraceSeconds: number;
  /** The batches' stop rules, checked as their runs make progress. */
  stops?: StopWatch;
  /** How long a preempted shard's requests in flight may finish before it is checkpointed. */
  preemptGraceMs: number;
  /** A spot worker's simulated reclaims: this many an hour at random (0: none), each with this cooldown. */
  preemptions?: { perHour: number; cooldownSeconds: number };
  logger: pino.Logger;
  /** Unix seconds. */
  now: () => number;
  /** Request outcomes and tokens of the shards run here (each worker's /metrics counts its own). */
  metrics?: BatchMetrics;
  /** Whose remembered answers an owner's batches share (the result cache's scope; KeyRing.cacheScopeOf). */
  cacheScope?: (owner: string | null) => string | null;
}

interface Running {
  run: ShardExecution;
  controller: AbortController;
  drain: AbortController;
  done: Promise<void>;
}

export class ClusterWorker {
  private readonly running = new Map<string, Running>();
  private closing = false;
  /** The claim under way, if any (close() waits for it, so no shard is claimed behind its back). */
  private filling: Promise<void> | undefined;
  /**
   * This worker's own pauses, in Date.now() milliseconds: they are process-local and sub-second. deps.now() is the
   * batches' clock (unix seconds, what the wire objects and leases carry), which tests move; the two never mix.
   */
  private preemptedUntil = 0;
  private pausedUntil = 0;
  private timers: NodeJS.Timeout[] = [];
  private reclaims: { stop(): void } | undefined;

  private readonly beats: OutageLog;
  private readonly claims: OutageLog;
  /** Before this (ms), a lapsed lease is not taken: this worker was cut off, and likely the others with it. */
  private lapsedAfter = 0;

  constructor(private readonly deps: ClusterWorkerDeps) {
    this.beats = new OutageLog(deps.logger, "heartbeat");
    this.claims = new OutageLog(deps.logger, "claiming shards");
  }

  async start(): Promise<void> {
    await this.register();
    const beat = Math.max(1_000, (this.deps.leaseSeconds * 1000) / 3);
    this.timers = [setInterval(() => this.fill(), POLL_MS), setInterval(() => void this.heartbeat(), beat)];
    for (const t of this.timers) t.unref();
    const p = this.deps.preemptions;
    if (this.deps.pool === "spot" && p) this.reclaims = randomPreemptions(p.perHour, () => this.preempt(p.cooldownSeconds));
    this.fill();
  }

  /** Shards running here, by batch (for /pools). */
  runningBatches(): string[] {
    return [...new Set([...this.running.values()].map((r) => r.run.shard.batchId))];
  }

  onEvent(e: ClusterEvent): void {
    if (e.type === "work" || e.type === "shard_done") this.fill();
    else if (e.type === "stop") this.stopBatch(e.batch_id, e.reason);
    else if (e.type === "pause") this.pauseBatch(e.batch_id);
    else if (e.type === "preempt" && e.pool === this.deps.pool) this.preempt(e.cooldown_seconds);
    else if (e.type === "yield") this.yieldShard(e.batch_id, e.idx, e.for_batch);
  }

  /** Claims shards while there is room. Safe to call at any time. */
  fill(): void {
    if (this.filling || this.closing || Date.now() < Math.max(this.preemptedUntil, this.pausedUntil)) return;
    const room = this.deps.capacity - this.running.size;
    if (room <= 0) return;
    this.filling = this.deps.queue
      .claim({
        workerId: this.deps.id,
        pool: this.deps.pool,
        models: this.served(),
        // One at a time (the loop claims again while there is room): each claim sees what this worker already runs,
        // so a batch's shards spread over idle workers (the stores' fairness rule) rather than filling one.
        limit: 1,
        leaseSeconds: this.deps.leaseSeconds,
        urgentSeconds: this.deps.urgentSeconds,
        now: this.deps.now(),
        takeLapsed: Date.now() >= this.lapsedAfter,
        holding: [...this.running.values()].map((r) => r.run.shard),
        weights: this.deps.weights,
      })
      .then(async (shards) => {
        // Claimed while this worker began to close or was preempted: straight back to the queue.
        if (this.closing || Date.now() < this.preemptedUntil) {
          await Promise.all(shards.map((s) => this.deps.queue.handBack(s).catch(() => undefined)));
          return 0;
        }
        for (const s of shards) this.launch(s);
        if (shards.length > 0) void this.register();
        if (this.claims.ok() > 0) this.lapsedAfter = Date.now() + this.deps.leaseSeconds * 1000;
        return shards.length;
      })
      .catch((err) => {
        this.claims.failed(err);
        return 0;
      })
      .then((n) => {
        this.filling = undefined;
        if (n > 0) this.fill();
      });
  }

  private launch(shard: ClaimedShard) {
    const { logger } = this.deps;
    const run = this.deps.newRun(shard);
    const controller = new AbortController();
    const drain = new AbortController();
    const key = shardKey(shard);
    const done = this.execute(run, controller.signal, drain.signal)
      .catch((err) => logger.error({ err, shard: key }, "shard run failed unexpectedly"))
      .finally(() => {
        this.running.delete(key);
        void this.register();
        this.fill();
      });
    this.running.set(key, { run, controller, drain, done });
  }

  private async execute(run: ShardExecution, signal: AbortSignal, drain: AbortSignal): Promise<void> {
    const { logger, batches, models, now } = this.deps;
    const s = run.shard;
    const fields = { batch_id: s.batchId, shard: s.idx, epoch: s.epoch, resumed_parts: s.parts.length };
    if (s.stopReason) this.abortRun(run, s.stopReason);
    try {
      // A batch takes the pool that starts it, and the one that resumes it (a preempted batch moves).
      const resumed = s.epoch > 1 || s.parts.length > 0 || s.counted.completed + s.counted.failed > 0;
      let first = false;
      let cache = batchCacheOptions(null, null);
      await batches.update(s.batchId, resumed ? ["validating", "in_progress"] : ["validating"], ({ batch, owner }) => {
        cache = batchCacheOptions(this.deps.cacheScope?.(owner) ?? null, batch.metadata);
        first = batch.status === "validating";
        if (first) transition(batch, "in_progress", now());
        if (this.deps.pool) batch.pool = this.deps.pool;
      });
      this.logStart(s, first, resumed);
      const lease = signal.aborted ? undefined : await models.acquire(s.model, signal);
      let end: Awaited<ReturnType<ShardExecution["run"]>>;
      try {
        const meter = progressMeter(this.deps.metrics, s.endpoint);
        const runId = `${run.key}#${s.epoch}`;
        // The run's first report is what earlier runs did: the rest is what this one looks at.
        let lines: number | undefined;
        end = await run.run(lease && withCacheOptions(lease.backend, cache), signal, drain, (p) => {
          meter?.(p);
          lines ??= Math.max(0, s.total - p.completed - p.failed);
          this.deps.stops?.soon(s.batchId, runId, p.sample && { ...p.sample, lines });
        });
      } finally {
        lease?.release();
      }
      logger.info(
        { ...fields, end },
        end === "done"
          ? "shard finished"
          : end === "fenced"
            ? "shard taken over by another worker"
            : "batch checkpointed: it resumes where it stopped",
      );
      if (end === "done") await this.deps.events.publish({ type: "shard_done", batch_id: s.batchId }).catch(() => undefined);
    } catch (err) {
      if (err instanceof ModelLoadError || err instanceof ShardFailure) {
        logger.error({ err, ...fields }, "the shard cannot run: its batch fails");
        await this.failBatch(s.batchId, (err as Error).message);
      } else {
        // Storage or the database down, say: the shard goes back to the queue, to be tried again here or elsewhere.
        logger.warn({ err, ...fields }, "shard interrupted by an error; handing it back");
        this.pausedUntil = Date.now() + RETRY_AFTER_ERROR_MS;
      }
      await this.deps.queue.handBack(s).catch(() => undefined);
    }
  }

  /**
   * The scheduling decision, at info: a batch's first shard (or one resumed from earlier runs) logs the batch as
   * started on this pool, whether that was a fallback (urgent work on spot, ordinary work on dedicated: the
   * preferred pool had no room) and its deadline; any other shard, only itself.
   */
  private logStart(s: ClaimedShard, first: boolean, resumed: boolean) {
    const { logger, pool } = this.deps;
    const fallback = pool !== null && s.urgent !== (pool === "dedicated");
    const fields = { batch_id: s.batchId, shard: s.idx, pool, urgent: s.urgent, fallback, deadline_at: s.deadlineAt };
    if (!first && !resumed) return logger.info(fields, "shard started");
    if (fallback)
      logger.info(
        fields,
        s.urgent
          ? "dedicated has no room: the urgent batch falls back to the spot pool"
          : "spot has no room: the batch falls back to the dedicated pool",
      );
    logger.info({ ...fields, resumed }, "batch started");
  }

  private async failBatch(batchId: string, why: string) {
    const { batches, events } = this.deps;
    const row = await batches.update(batchId, ["validating", "in_progress"], (r) => {
      if (r.stopReason) return false;
      const entry = { code: "batch_failed", message: `The batch stopped unexpectedly: ${why}`, line: null, param: null };
      r.batch.errors = { object: "list", data: [...(r.batch.errors?.data ?? []), entry] };
      r.stopReason = "failed";
    });
    if (row) await events.publish({ type: "stop", batch_id: batchId, reason: "failed" }).catch(() => undefined);
  }

  /** Requests in flight get the grace a preemption gives; then each run checkpoints and hands its shard back. */
  private pauseBatch(batchId: string) {
    for (const r of this.running.values()) if (r.run.shard.batchId === batchId) this.drainRun(r, PAUSED, this.deps.preemptGraceMs);
  }

  private stopBatch(batchId: string, reason: StopReason) {
    for (const r of this.running.values()) if (r.run.shard.batchId === batchId) this.abortRun(r.run, reason);
  }

  /** A cancel lets requests in flight finish (CANCEL_GRACE_SECONDS), as OpenAI cancels; an expiry or failure stops at once. */
  private abortRun(run: ShardExecution, reason: StopReason) {
    const r = this.running.get(run.key);
    run.shard.stopReason = reason;
    if (!r) return;
    if (reason === "cancelled") this.drainRun(r, CANCELLED, this.deps.cancelGraceSeconds * 1000);
    else if (!r.controller.signal.aborted) {
      r.controller.abort(reason === "expired" ? EXPIRED : FAILED(STOPPED_WHY));
    }
  }

  /** The spot capacity is reclaimed: every shard checkpoints and goes back to the queue; no claims until the cooldown ends. */
  private preempt(cooldownSeconds: number) {
    this.preemptedUntil = Date.now() + cooldownSeconds * 1000;
    this.deps.logger.warn({ shards: this.running.size, cooldown_seconds: cooldownSeconds }, "spot capacity preempted: handing shards back");
    this.drainAll(PREEMPTED, this.deps.preemptGraceMs);
    void this.deps.workers.preempted(this.deps.id, cooldownSeconds).catch(() => undefined);
  }

  private drainAll(reason: AbortReason, graceMs: number) {
    for (const r of this.running.values()) this.drainRun(r, reason, graceMs);
  }

  /** Requests in flight get `graceMs`, then the run checkpoints and hands its shard back. */
  private drainRun(
    r: { drain: AbortController; controller: AbortController; done: Promise<unknown> },
    reason: AbortReason,
    graceMs: number,
  ) {
    if (r.drain.signal.aborted) return;
    r.drain.abort(reason);
    const timer = setTimeout(() => r.controller.abort(reason), graceMs);
    timer.unref();
    void r.done.finally(() => clearTimeout(timer));
  }

  /** A more urgent batch waits for this slot: the shard yields at its next checkpoint and goes back to the queue. */
  private yieldShard(batchId: string, idx: number, forBatch: string) {
    const r = this.running.get(shardKey({ batchId, idx }));
    if (!r || r.drain.signal.aborted) return;
    this.deps.logger.warn(
      { batch_id: batchId, shard: idx, for_batch: forBatch, pool: this.deps.pool },
      "yielding a shard to a more urgent batch: it checkpoints and resumes later",
    );
    this.deps.metrics?.slaEvent("yield", this.deps.pool);
    this.drainRun(r, YIELDED, this.deps.preemptGraceMs);
  }

  private async heartbeat(): Promise<void> {
    const runs = [...this.running.values()].map((r) => r.run);
    try {
      // Its failure is the heartbeat's: a beat whose row was not written is not one that works again.
      await this.registerRow();
      const { lost, stops, paused } = await this.deps.queue.heartbeat(
        this.deps.id,
        runs.map((r) => r.shard),
        this.deps.leaseSeconds,
      );
      for (const run of runs) {
        if (lost.has(run.key)) run.lose({ code: "shutdown", message: "The shard's lease was taken over by another worker." });
        const stop = stops.get(run.shard.batchId);
        if (stop && run.shard.stopReason !== stop) this.abortRun(run, stop);
        else if (paused.has(run.shard.batchId)) this.pauseBatch(run.shard.batchId);
      }
      this.beats.ok();
    } catch (err) {
      this.beats.failed(err, { note: "the shards run on; they are taken over if this lasts past LEASE_SECONDS" });
    }
  }

  private served(): string[] {
    return this.deps.serves ?? this.deps.models.registry.names;
  }

  /** Registers again now (its address for synchronous requests became known), not at the next heartbeat. */
  announce(): Promise<void> {
    return this.register();
  }

  /** The worker's row, a failure told as the heartbeat's outage. */
  private register(): Promise<void> {
    return this.registerRow().catch((err) => this.beats.failed(err));
  }

  /** The worker's row: its pool, capacity and what it runs (the scheduler and /pools read it). */
  private async registerRow(): Promise<void> {
    const { id, pool, capacity } = this.deps;
    if (!pool) return;
    await this.deps.workers.register({
      id,
      pool,
      capacity,
      models: this.served(),
      running: this.runningBatches(),
      url: this.deps.url?.() ?? null,
      // What an API server with no models of its own names batches by (batches/served-models.ts).
      catalogue: catalogueOf(this.deps.models.registry, this.deps.serves),
    });
  }

  /**
   * Stops claiming and drains: requests in flight get graceMs to finish, then the rest is checkpointed and every
   * shard handed back at once (another worker resumes it without waiting for the lease to lapse).
   */
  async close(opts: { graceMs: number }): Promise<void> {
    this.closing = true;
    for (const t of this.timers) clearInterval(t);
    this.reclaims?.stop();
    await this.filling;
    this.drainAll(SHUTDOWN, opts.graceMs);
    await Promise.allSettled([...this.running.values()].map((r) => r.done));
    if (this.deps.pool) await this.deps.workers.unregister(this.deps.id).catch(() => undefined);
  }
}
