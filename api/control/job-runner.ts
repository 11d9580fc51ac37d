// Runs one batch through the pipeline and moves it to its final status. The same path serves a fresh
// start and a resume after a restart: torn tails are repaired, what is on disk counts as done and is
// never run again.
import { createHash } from "node:crypto";
import { stat } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import type pino from "pino";
import type { ModelRouter } from "../../backends/router.js";
import type { InferenceBackend } from "../../openai/backend.js";
import { repairTornTail, scanDone } from "../../pipeline/resume.js";
import { runBatchFile } from "../../pipeline/run-batch.js";
import type { AbortReason, Endpoint, Progress, RunBatchResult } from "../../pipeline/types.js";
import type { Config } from "../config.js";
import { isStorageFull } from "../errors.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import type { Batch, BatchStatus } from "../schemas/objects.js";
import type { BatchRecord, BatchStore } from "../stores/batch-store.js";
import type { DiskFileStore } from "../stores/file-store.js";
import { canTransition, isFinal, transition } from "./batch-state.js";
import type { DeadlineTimers } from "./deadline-timers.js";
import type { QueuedJob } from "./job-queue.js";
import type { Lease, PoolScheduler } from "./pool-scheduler.js";

/** How often a final status that could not be written is tried again (one small file: cheap). */
const FINAL_RETRY_MS = 2_000;
/** A batch paused by a full disk looks for free space this often, and goes on once this much is free. */
const SPACE_POLL_MS = 2_000;
const RESUME_FREE_BYTES = 1024 * 1024;

export const CANCELLED: AbortReason = { code: "batch_cancelled", message: "The batch was cancelled before this request ran." };
export const EXPIRED: AbortReason = { code: "batch_expired", message: "The batch expired before this request ran." };

export interface JobRunnerDeps {
  config: Config;
  /** The batch's model's backend is taken from here for each run. */
  models: ModelRouter;
  store: BatchStore;
  files: DiskFileStore;
  /** Disarmed when a batch ends. */
  deadlines: DeadlineTimers;
  scheduler: PoolScheduler;
  logger: pino.Logger;
  /** Unix seconds. */
  now: () => number;
  metrics?: BatchMetrics;
}

export class JobRunner {
  /** Batches being closed out right now (so a cancel and an expiry cannot both end one), and their ends. */
  private readonly ending = new Map<string, Promise<void>>();

  constructor(private readonly deps: JobRunnerDeps) {}

  isEnding(id: string): boolean {
    return this.ending.has(id);
  }

  /** Resolves once a close-out under way is over (at once when none is). */
  closedOut(id: string): Promise<void> {
    return this.ending.get(id) ?? Promise.resolve();
  }

  /**
   * The worker's RunJob: never throws; a failure midway fails the batch and the service carries on. A full
   * disk pauses the batch instead: what it wrote stays, and it goes on once space returns (as a restart
   * would resume it); a cancel, an expiry or a shutdown during the pause ends it the usual way.
   */
  run = async (job: QueuedJob, lease: Lease, signal: AbortSignal, drain?: AbortSignal): Promise<void> => {
    const { store, logger } = this.deps;
    const rec = store.get(job.batchId);
    if (!rec || isFinal(rec.batch.status) || rec.batch.status === "cancelling" || this.ending.has(job.batchId)) return;
    const b = rec.batch;
    try {
      for (let pauses = 0; ; pauses++) {
        try {
          await this.runOnce(rec, lease, signal, drain, pauses === 0 ? (job.resumed ? "resumed" : "started") : undefined);
          return;
        } catch (err) {
          if (!isStorageFull(err) || signal.aborted || drain?.aborted) throw err;
          await this.waitForSpace(rec, err, AbortSignal.any(drain ? [signal, drain] : [signal]));
        }
      }
    } catch (err) {
      // Torn down under a shutdown (the engine closing, say): the batch resumes on restart, it did not fail.
      if ((signal.reason as AbortReason | undefined)?.code === "shutdown") {
        logger.warn({ err, batch_id: b.id }, "batch interrupted by shutdown; it resumes on restart");
        return;
      }
      await this.fail(rec, err, lease);
    }
  };

  private async runOnce(rec: BatchRecord, lease: Lease, signal: AbortSignal, drain?: AbortSignal, how?: "started" | "resumed") {
    const { store, logger, now } = this.deps;
    const b = rec.batch;
    b.pool = lease.pool;
    if (b.status === "validating") transition(b, "in_progress", now());
    await store.save(b.id);
    if (how)
      logger.info(
        { batch_id: b.id, pool: lease.pool, fallback: lease.fallback, resumed: how === "resumed", deadline_at: b.deadline_at },
        "batch started",
      );
    const result = await this.execute(rec, signal, drain);
    applyProgress(b, result);
    if (result.aborted?.code === "shutdown") {
      await store.save(b.id);
      logger.info(
        { batch_id: b.id, request_counts: b.request_counts, reason: result.aborted.message },
        "batch checkpointed: it resumes where it stopped",
      );
      return;
    }
    // A cancel may have landed after the last request finished: it still wins.
    const to: BatchStatus =
      b.status === "cancelling"
        ? "cancelled"
        : result.aborted?.code === "batch_cancelled"
          ? "cancelled"
          : result.aborted
            ? "expired"
            : "completed";
    await this.finish(rec, to, lease);
  }

  /** Returns once the disk has room again, or at once when `stop` aborts. */
  private async waitForSpace(rec: BatchRecord, err: unknown, stop: AbortSignal) {
    const { store, logger } = this.deps;
    const b = rec.batch;
    logger.warn(
      { err, batch_id: b.id, request_counts: b.request_counts },
      "the disk is full: the batch is paused, what it wrote is kept, and it goes on once space is freed",
    );
    while (!stop.aborted && !(await store.hasFreeSpace(RESUME_FREE_BYTES)))
      await sleep(SPACE_POLL_MS, undefined, { signal: stop }).catch(() => undefined);
    if (!stop.aborted) logger.info({ batch_id: b.id }, "disk space is back: the paused batch goes on");
  }

  /**
   * Ends a batch that is not running (queued, or found unfinished at startup) with `reason`: every
   * request without a result gets an error line, so completed + failed == total.
   */
  async closeOut(rec: BatchRecord, reason: AbortReason): Promise<void> {
    const b = rec.batch;
    if (isFinal(b.status) || this.ending.has(b.id)) return;
    const work = this.end(rec, reason);
    this.ending.set(b.id, work);
    try {
      await work;
    } finally {
      this.ending.delete(b.id);
    }
  }

  private async end(rec: BatchRecord, reason: AbortReason): Promise<void> {
    const b = rec.batch;
    try {
      const stop = new AbortController();
      stop.abort(reason);
      if (reason.code === "batch_cancelled" && b.status === "in_progress") transition(b, "cancelling", this.deps.now());
      applyProgress(b, await this.execute(rec, stop.signal));
      await this.finish(rec, reason.code === "batch_cancelled" ? "cancelled" : "expired");
    } catch (err) {
      await this.fail(rec, err);
    }
  }

  private async execute(rec: BatchRecord, signal: AbortSignal, drain?: AbortSignal): Promise<RunBatchResult> {
    const { store } = this.deps;
    const b = rec.batch;
    const p = store.paths(b.id);
    await repairTornTail(p.output);
    await repairTornTail(p.errors);
    const { done, ...base } = await scanDone(p.output, p.errors);
    applyProgress(b, base);
    // A run that only accounts for what will not run (a cancel, an expiry, a failure) needs no model loaded.
    // Batches name the registry's model; one recorded under another name (an alias, an older record) resolves too.
    const model = this.deps.models.registry.resolve(b.model)?.name ?? b.model ?? "";
    const lease = signal.aborted ? undefined : await this.deps.models.acquire(model, signal);
    try {
      return await this.runFile(rec, lease?.backend, base, done, signal, drain);
    } finally {
      lease?.release();
    }
  }

  private runFile(
    rec: BatchRecord,
    backend: InferenceBackend | undefined,
    base: Progress,
    done: ReadonlySet<string>,
    signal: AbortSignal,
    drain?: AbortSignal,
  ): Promise<RunBatchResult> {
    const { config, store } = this.deps;
    const b = rec.batch;
    const p = store.paths(b.id);
    const track = this.deps.metrics?.trackProgress(b.endpoint, base);
    return runBatchFile({
      inputPath: p.input,
      outputPath: p.output,
      errorPath: p.errors,
      endpoint: b.endpoint as Endpoint,
      backend,
      batchSize: config.pipeline.batchSize,
      // 0: the pipeline's default (pipeline/run-batch.ts defaultConcurrency).
      concurrency: config.pipeline.concurrency,
      done,
      base,
      signal,
      drain,
      onProgress: (progress) => {
        applyProgress(b, progress);
        store.touch(b.id);
        track?.(progress);
      },
    });
  }

  /** Registers the result files and enters the final status (completed goes through finalizing). */
  private async finish(rec: BatchRecord, to: "completed" | "cancelled" | "expired", lease?: Lease) {
    const { store, logger, now } = this.deps;
    const b = rec.batch;
    if (to === "completed" && b.status !== "finalizing") {
      const finalizing = structuredClone(b);
      transition(finalizing, "finalizing", now());
      // Shown while the result files are registered, once on disk; if it cannot be written the batch shows
      // what the disk has, and the final status below says the rest.
      await store.commit(b.id, finalizing).catch(() => undefined);
    }
    await this.registerResults(rec);
    const next = structuredClone(b);
    if (to === "completed" && next.status !== "finalizing") transition(next, "finalizing", now());
    if (to === "cancelled" && next.status !== "cancelling" && next.status !== "validating") transition(next, "cancelling", now());
    transition(next, to, now());
    next.deadline_met =
      next.status === "completed" ? (next.completed_at ?? 0) <= next.deadline_at : next.status === "expired" ? false : null;
    this.ended(b.id, lease);
    await this.commitFinal(rec, next, () => {
      const fields = { batch_id: b.id, status: b.status, pool: b.pool, deadline_met: b.deadline_met, request_counts: b.request_counts };
      if (b.deadline_met === false) logger.warn(fields, "batch missed its deadline");
      else logger.info(fields, `batch ${b.status}`);
    });
  }

  /**
   * A final status is shown only once it is on disk. When it cannot be written (a full disk), the batch keeps
   * the status the disk has, which is what a restart resumes from, and the write is retried until it lands:
   * no client ever reads "failed" for a batch that a restart would complete, and pays twice for it.
   */
  private async commitFinal(rec: BatchRecord, next: Batch, onCommitted?: () => void): Promise<void> {
    const { store, logger, metrics } = this.deps;
    const id = rec.batch.id;
    const attempt = async () => {
      await store.commit(id, next);
      metrics?.batchEnded(rec.batch);
      onCommitted?.();
    };
    try {
      await attempt();
    } catch (err) {
      logger.error(
        { err, batch_id: id, status: rec.batch.status, final_status: next.status },
        `cannot persist the batch's final status: it stays ${rec.batch.status}, as on disk, and the write is retried`,
      );
      const retry = setInterval(() => {
        if (isFinal(rec.batch.status) || store.get(id) !== rec) return clearInterval(retry);
        attempt().then(
          () => clearInterval(retry),
          () => undefined,
        );
      }, FINAL_RETRY_MS);
      retry.unref();
    }
  }

  private async fail(rec: BatchRecord, err: unknown, lease?: Lease) {
    const { logger, now } = this.deps;
    const b = rec.batch;
    logger.error({ err, batch_id: b.id, status: b.status }, "batch failed midway");
    if (isFinal(b.status)) {
      this.ended(b.id, lease);
      return;
    }
    const cause = (err as Error)?.message ?? String(err);
    const entry = { code: "batch_failed", message: `The batch stopped unexpectedly: ${cause}`, line: null };
    b.errors = { object: "list", data: [...(b.errors?.data ?? []), entry] };
    await this.accountUnrun(rec, { code: "batch_failed", message: `The batch failed before this request ran: ${cause}` });
    try {
      await this.registerResults(rec);
    } catch (regErr) {
      logger.error({ err: regErr, batch_id: b.id }, "cannot register the result files of a failed batch");
    }
    // A batch being cancelled can only end cancelled.
    const next = structuredClone(b);
    transition(next, canTransition(next.status, "failed") ? "failed" : "cancelled", now());
    next.deadline_met = null;
    this.ended(b.id, lease);
    await this.commitFinal(rec, next);
  }

  /**
   * A failed batch still accounts for every request: each one without a result gets an error line
   * with `reason`. Where even that cannot be written (the failure may be the disk itself), the
   * requests without a line are still counted failed, so completed + failed == total holds.
   */
  private async accountUnrun(rec: BatchRecord, reason: AbortReason) {
    const b = rec.batch;
    try {
      const stop = new AbortController();
      stop.abort(reason);
      applyProgress(b, await this.execute(rec, stop.signal));
    } catch (err) {
      this.deps.logger.error(
        { err, batch_id: b.id },
        "cannot write the error lines of a failed batch; its unrun requests are counted failed",
      );
    }
    const c = b.request_counts;
    c.failed = Math.max(c.failed, c.total - c.completed);
  }

  /**
   * A batch just became final: its deadline is moot and its slot is free from this moment, so no
   * one sees a final batch still holding a pool (the worker's own release later is a no-op).
   */
  private ended(id: string, lease?: Lease) {
    this.deps.deadlines.clear(id);
    if (lease) this.deps.scheduler.release(lease);
  }

  /** output_file_id / error_file_id for whichever result file has lines. */
  private async registerResults(rec: BatchRecord) {
    const { store, files } = this.deps;
    const b = rec.batch;
    const p = store.paths(b.id);
    for (const [kind, file] of [
      ["output", p.output],
      ["error", p.errors],
    ] as const) {
      if (!(await hasContent(file))) continue;
      const obj = await files.register({
        id: resultFileId(b.id, kind),
        path: file,
        filename: `${b.id}_${kind}.jsonl`,
        purpose: "batch_output",
        owner: rec.owner,
        expiresAfter: rec.outputExpiresAfter,
      });
      if (kind === "output") b.output_file_id = obj.id;
      else b.error_file_id = obj.id;
    }
  }
}

function applyProgress(b: Batch, p: Progress) {
  b.request_counts.completed = p.completed;
  b.request_counts.failed = p.failed;
  const u = p.usage;
  b.usage = {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cachedTokens },
    output_tokens: u.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.promptTokens + u.completionTokens,
  };
}

/** Derived from the batch id, so finalizing twice (a crash in between) registers the same file. */
export function resultFileId(batchId: string, kind: "output" | "error"): string {
  return `file-${createHash("sha256").update(`${batchId}:${kind}`).digest("hex").slice(0, 24)}`;
}

async function hasContent(file: string): Promise<boolean> {
  try {
    return (await stat(file)).size > 0;
  } catch {
    return false;
  }
}
