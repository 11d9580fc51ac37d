// The background worker: takes the next job from the queue whenever the pool scheduler has a free
// slot, runs it, and releases the slot however the job ends. Event driven (enqueue and release wake
// it), so there is no polling; concurrency is bounded by the pools' total capacity.
import type pino from "pino";
import { unixNow } from "../clock.js";
import type { QueueStats } from "../contracts.js";
import type { AbortReason } from "../../pipeline/types.js";
import { isUrgent, type JobQueue, type QueuedJob } from "./job-queue.js";
import type { Lease, PoolScheduler } from "./pool-scheduler.js";

/**
 * Runs one job to its end. Must settle promptly once `signal` aborts (signal.reason is an AbortReason).
 * `drain` asks for a graceful stop before a shutdown: start nothing new, finish what is in flight.
 */
export type RunJob = (job: QueuedJob, lease: Lease, signal: AbortSignal, drain: AbortSignal) => Promise<void>;

export interface WorkerOptions {
  queue: JobQueue;
  scheduler: PoolScheduler;
  runJob: RunJob;
  logger: pino.Logger;
  urgentSeconds: number;
  /** Unix seconds. */
  now?: () => number;
  /** The job's model runs on an upstream cluster: it starts without a slot of the simulated GPU pools. */
  runsUpstream?: (job: QueuedJob) => boolean;
  /** The job's model is loaded in this process: among equals, its batches go first (no load to wait for). */
  isLoaded?: (job: QueuedJob) => boolean;
  /** A preempted job has settled with its checkpoint: put it back in the queue (first in line). */
  requeue?: (job: QueuedJob) => void;
}

interface Running {
  job: QueuedJob;
  preempted?: boolean;
  controller: AbortController;
  drain: AbortController;
  lease: Lease;
  done: Promise<void>;
}

export const SHUTDOWN: AbortReason = { code: "shutdown", message: "The service is shutting down; the batch resumes on restart." };
/** A checkpoint like a shutdown's: nothing is written for what did not run, and the batch resumes. */
export const PREEMPTED: AbortReason = {
  code: "shutdown",
  message: "Its spot capacity was preempted; the batch resumes from its checkpoint.",
};

/** An aborted request stops within a token, so settling after the abort needs far less than the drain. */
const MAX_ABORT_SETTLE_MS = 5_000;

export class Worker {
  private readonly running = new Map<string, Running>();
  private started = false;
  private isClosing = false;
  /** The job last logged as waiting for capacity, so a wait is logged once and not on every wake. */
  private waitingFor: string | undefined;
  private readonly now: () => number;

  constructor(private readonly opts: WorkerOptions) {
    this.now = opts.now ?? unixNow;
    opts.scheduler.onRelease(() => this.wake());
  }

  start(): void {
    this.started = true;
    this.wake();
  }

  /** Starts as many queued jobs as the pools allow. Safe to call at any time. */
  wake(): void {
    if (!this.started || this.isClosing) return;
    const { queue, scheduler, logger } = this.opts;
    for (;;) {
      const now = this.now();
      const upstream = this.opts.runsUpstream && queue.find(this.opts.runsUpstream);
      if (upstream) {
        queue.remove(upstream.batchId);
        this.launch(upstream, { jobId: upstream.batchId, pool: null, fallback: false });
        continue;
      }
      // A model with fewer batches running goes first, then one already loaded: a batch for one model does not
      // queue behind another model's, and switching models (a load) is put off while other work is ready.
      const job = queue.peekNext(now, (j) => this.runningFor(j.model) + (this.opts.isLoaded?.(j) === false ? 0.5 : 0));
      if (!job) return;
      const urgent = isUrgent(job, now, this.opts.urgentSeconds);
      const lease = scheduler.tryAcquire(job.batchId, { urgent });
      if (!lease) {
        if (this.waitingFor !== job.batchId) {
          this.waitingFor = job.batchId;
          logger.info(
            { batch_id: job.batchId, urgent, queued: queue.depth, running: this.running.size },
            "spot and dedicated pools full: batch waits for a slot",
          );
        }
        return;
      }
      this.waitingFor = undefined;
      queue.remove(job.batchId);
      this.launch(job, lease);
    }
  }

  private launch(job: QueuedJob, lease: Lease) {
    const controller = new AbortController();
    const drain = new AbortController();
    const done = Promise.resolve()
      .then(() => this.opts.runJob(job, lease, controller.signal, drain.signal))
      .catch((err) => this.opts.logger.error({ err, batch_id: job.batchId }, "batch job failed unexpectedly"))
      .finally(() => {
        const run = this.running.get(job.batchId);
        this.running.delete(job.batchId);
        // Before the slot goes back, so the wake that follows the release finds it queued.
        if (run?.preempted && !this.isClosing) this.opts.requeue?.({ ...job, resumed: true });
        this.opts.scheduler.release(lease);
      });
    this.running.set(job.batchId, { job, controller, drain, lease, done });
  }

  private runningFor(model: string | undefined): number {
    let n = 0;
    for (const r of this.running.values()) if (r.job.model === model) n++;
    return n;
  }

  isRunning(batchId: string): boolean {
    return this.running.has(batchId);
  }

  /** close() was called: nothing new starts. */
  get closing(): boolean {
    return this.isClosing;
  }

  /** Running but already told to stop (cancel, expiry or shutdown). */
  isStopping(batchId: string): boolean {
    const run = this.running.get(batchId);
    return run !== undefined && (run.controller.signal.aborted || run.drain.signal.aborted);
  }

  /** Resolves once the job has settled (at once when it is not running). */
  settled(batchId: string): Promise<void> {
    return this.running.get(batchId)?.done ?? Promise.resolve();
  }

  /** Stops a running job with `reason`; false when it is not running. */
  abort(batchId: string, reason: AbortReason): boolean {
    const run = this.running.get(batchId);
    if (!run) return false;
    run.controller.abort(reason);
    return true;
  }

  /**
   * Stops a running job as OpenAI cancels a batch: nothing new starts, the requests already running get up
   * to graceMs to finish and keep their results, then whatever still runs is stopped. `reason` ends the
   * requests that never started.
   */
  stopGracefully(batchId: string, reason: AbortReason, graceMs: number): boolean {
    const run = this.running.get(batchId);
    if (!run) return false;
    run.drain.abort(reason);
    const timer = setTimeout(() => run.controller.abort(reason), graceMs);
    timer.unref();
    void run.done.finally(() => clearTimeout(timer));
    return true;
  }

  /**
   * Takes `pool`'s capacity away (a simulated spot preemption): its running jobs drain as on a shutdown (requests
   * in flight get graceMs to finish and be written), then go back to the queue to resume; the slots come back
   * after cooldownMs. Returns the ids of the jobs preempted.
   */
  preempt(pool: "spot", opts: { graceMs: number; cooldownMs: number }): string[] {
    const ids: string[] = [];
    for (const [id, run] of this.running) {
      if (run.lease.pool !== pool || run.controller.signal.aborted || run.drain.signal.aborted) continue;
      run.preempted = true;
      run.drain.abort(PREEMPTED);
      const timer = setTimeout(() => run.controller.abort(PREEMPTED), opts.graceMs);
      timer.unref();
      void run.done.finally(() => clearTimeout(timer));
      ids.push(id);
    }
    const capacity = this.opts.scheduler.status().find((p) => p.name === pool)?.capacity ?? 0;
    this.opts.scheduler.lose(pool, capacity, opts.cooldownMs);
    this.opts.logger.warn({ pool, batches: ids }, "spot capacity preempted: its batches checkpoint and go back to the queue");
    return ids;
  }

  /** `running` counts jobs holding a pool slot (a job gives its slot back the moment it turns final). */
  stats(): QueueStats {
    return { depth: this.opts.queue.depth, max_depth: this.opts.queue.maxDepth, running: this.opts.scheduler.inUse };
  }

  /** Resolves once every job started so far has settled. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()].map((r) => r.done));
  }

  /**
   * Stops taking jobs and drains the running ones: no new request starts, requests in flight get up
   * to graceMs to finish and be written. Whatever still runs then is aborted with reason "shutdown"
   * (checkpointed: its batch stays in_progress, and the restart runs only what has no result on
   * disk) and gets a little longer to settle. Every slot is released. Bounded by graceMs plus
   * min(graceMs, 5 s); graceMs 0 aborts at once.
   */
  async close(opts: { graceMs: number }): Promise<void> {
    const { logger } = this.opts;
    if (!this.isClosing) {
      this.isClosing = true;
      for (const run of this.running.values()) run.drain.abort(SHUTDOWN);
      logger.info(
        { running: this.running.size, queued: this.opts.queue.depth, grace_ms: opts.graceMs },
        "worker stopping: requests in flight may finish",
      );
    }
    await this.idleWithin(opts.graceMs);
    if (this.running.size > 0) {
      logger.warn({ running: this.running.size }, "grace period over: checkpointing the requests still running");
      for (const run of this.running.values()) run.controller.abort(SHUTDOWN);
      await this.idleWithin(Math.min(opts.graceMs, MAX_ABORT_SETTLE_MS));
    }
    if (this.running.size > 0) logger.warn({ running: this.running.size }, "jobs still settling after the grace period");
    for (const run of this.running.values()) this.opts.scheduler.release(run.lease);
  }

  private async idleWithin(ms: number): Promise<void> {
    if (this.running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, Math.max(0, ms));
      timer.unref();
    });
    await Promise.race([this.idle(), grace]);
    clearTimeout(timer);
  }
}
