// The Batch API behind the routes: create (validate, then queue), read, list, cancel, and the
// deadline handler that expires what did not finish in its completion window.
import { existsSync } from "node:fs";
import { copyFile, link, mkdir, rm, writeFile } from "node:fs/promises";
import type pino from "pino";
import { readCompleteJsonLines } from "../../pipeline/jsonl.js";
import { validateBatchFile } from "../../pipeline/validate.js";
import type { ModelRegistry } from "../../backends/registry.js";
import type { Endpoint, ValidationResult } from "../../pipeline/types.js";
import type { Config } from "../config.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import type { BatchService, CreateBatchInput, CreateInlineBatchInput, ExpiresAfter, Owner, Page } from "../contracts.js";
import type { DiskFileStore } from "../stores/file-store.js";
import { NotFoundError, shuttingDown } from "./errors.js";
import type { Batch, BatchEndpoint } from "../schemas/objects.js";
import type { BatchPaths, BatchRecord, BatchStore } from "../stores/batch-store.js";
import { newBatchId } from "../stores/ids.js";
import { isEnding, transition } from "./batch-state.js";
import { parseCompletionWindow } from "./completion-window.js";
import type { DeadlineTimers } from "./deadline-timers.js";
import { CANCELLED, EXPIRED, type JobRunner } from "./job-runner.js";
import { checkEndpoint, checkInputFile, newBatchObject } from "./batch-object.js";
import type { JobQueue } from "./job-queue.js";
import type { Worker } from "./worker.js";

/** Sent as Retry-After with a 503 while the service drains: a restart takes seconds. */
const SHUTDOWN_RETRY_AFTER_SECONDS = 5;

export interface BatchServiceDeps {
  config: Config;
  store: BatchStore;
  files: DiskFileStore;
  queue: JobQueue;
  worker: Worker;
  runner: JobRunner;
  deadlines: DeadlineTimers;
  /** Which names a batch may put in `model`, and what each is called (the batch reports the registry's name). */
  registry: ModelRegistry;
  logger: pino.Logger;
  /** Unix seconds. */
  now: () => number;
  metrics?: BatchMetrics;
}

interface NewBatch {
  owner: Owner;
  endpoint: BatchEndpoint;
  completion_window: string;
  metadata?: Record<string, string> | null;
  output_expires_after?: ExpiresAfter;
  /** Puts the requests at paths.input; returns the input file's id. */
  writeInput(paths: BatchPaths, batchId: string): Promise<string>;
}

export class QueueingBatchService implements BatchService {
  /** Creations under way that will take a queue slot; counted so concurrent creates cannot overfill it. */
  private reserved = 0;

  constructor(private readonly deps: BatchServiceDeps) {}

  async create(input: CreateBatchInput): Promise<Batch> {
    const file = checkInputFile(this.deps.files.get(input.input_file_id, input.owner), input.input_file_id);
    return this.createBatch({
      ...input,
      async writeInput(paths) {
        // The batch keeps its own name for the requests, so deleting the upload cannot break it.
        await link(file.path, paths.input).catch(() => copyFile(file.path, paths.input));
        return input.input_file_id;
      },
    });
  }

  async createInline(input: CreateInlineBatchInput): Promise<Batch> {
    const { files } = this.deps;
    return this.createBatch({
      ...input,
      async writeInput(paths, batchId) {
        await writeFile(paths.input, input.lines.map((l) => `${JSON.stringify(l)}\n`).join(""));
        const obj = await files.register({ path: paths.input, filename: `${batchId}_input.jsonl`, purpose: "batch", owner: input.owner });
        return obj.id;
      },
    });
  }

  // Callers get snapshots: the live objects keep changing under the worker.
  get(id: string, owner: Owner): Batch | undefined {
    const rec = this.deps.store.get(id, owner);
    return rec && snapshot(rec.batch);
  }

  list(q: { after?: string; limit: number; owner: Owner }): Page<Batch> {
    const page = this.deps.store.list(q);
    return { ...page, data: page.data.map(snapshot) };
  }

  async cancel(id: string, owner: Owner): Promise<Batch> {
    const { store, worker, queue, runner, logger, now } = this.deps;
    const rec = store.get(id, owner);
    if (!rec) throw new NotFoundError("batch", id);
    const b = rec.batch;
    // Nothing to cancel: already over or being cancelled.
    if (isEnding(b.status)) return snapshot(b);
    // A cancel accepted now would be dropped by the restart: the client is told to try again.
    if (worker.closing) throw shuttingDown(SHUTDOWN_RETRY_AFTER_SECONDS);
    if (runner.isEnding(id) || worker.isStopping(id)) {
      // The deadline (or another end) was decided first: answer with how the batch ended, never with a
      // status that is about to change under the client (one ordered decision, whichever wins).
      await Promise.all([worker.settled(id), runner.closedOut(id)]);
      const after = store.get(id)?.batch ?? b;
      // A preempted batch stopped with a checkpoint and went back to the queue: the cancel applies to it there.
      if (!isEnding(after.status) && !worker.isRunning(id) && !worker.closing) return this.cancel(id, owner);
      return snapshot(after);
    }
    if (worker.isRunning(id)) {
      transition(b, "cancelling", now());
      const cancelling = snapshot(b);
      worker.stopGracefully(id, CANCELLED, this.deps.config.cancelGraceSeconds * 1000);
      logger.info({ batch_id: id }, "cancelling running batch");
      await store.save(id);
      return cancelling;
    }
    queue.remove(id);
    this.deps.deadlines.clear(id);
    logger.info({ batch_id: id }, "cancelling queued batch");
    await runner.closeOut(rec, CANCELLED);
    return snapshot(b);
  }

  results(id: string, owner: Owner): AsyncIterable<string> | undefined {
    const rec = this.deps.store.get(id, owner);
    if (!rec) return undefined;
    const out = this.deps.store.paths(id).output;
    return existsSync(out) ? readCompleteJsonLines(out) : undefined;
  }

  /** Queues an accepted batch and arms its deadline. `resumed`: it was running before a restart. */
  schedule(rec: BatchRecord, opts: { resumed?: boolean } = {}): void {
    const b = rec.batch;
    // Recovered batches were accepted before the restart; their slots were reserved then.
    this.deps.queue.enqueue(
      { batchId: b.id, seq: rec.seq, submittedAt: b.submitted_at, deadlineAt: b.deadline_at, resumed: opts.resumed, model: b.model },
      { force: true },
    );
    this.deps.deadlines.arm(b.id, b.deadline_at, () => {
      this.expire(b.id).catch((err) => this.deps.logger.error({ err, batch_id: b.id }, "cannot expire batch"));
    });
    this.deps.worker.wake();
  }

  /** The deadline passed: a queued batch ends now, a running one is stopped and ends expired. */
  async expire(id: string): Promise<void> {
    const { store, queue, worker, runner, logger } = this.deps;
    const rec = store.get(id);
    if (!rec || isEnding(rec.batch.status)) return;
    logger.warn(
      { batch_id: id, status: rec.batch.status, deadline_at: rec.batch.deadline_at },
      "batch reached its deadline unfinished: expiring",
    );
    if (worker.abort(id, EXPIRED)) return;
    queue.remove(id);
    await runner.closeOut(rec, EXPIRED);
  }

  private async createBatch(input: NewBatch): Promise<Batch> {
    const { config, store, queue, logger, now } = this.deps;
    const windowSeconds = parseCompletionWindow(input.completion_window);
    checkEndpoint(input.endpoint);
    // A batch accepted now could not start before the restart, and its state might land after the final flush.
    if (this.deps.worker.closing) throw shuttingDown(SHUTDOWN_RETRY_AFTER_SECONDS);
    queue.ensureRoom(this.reserved + 1);
    this.reserved++;
    try {
      const id = newBatchId();
      const paths = store.paths(id);
      await mkdir(paths.dir);
      let inputFileId: string;
      let v: ValidationResult;
      try {
        inputFileId = await input.writeInput(paths, id);
        v = await validateBatchFile(paths.input, input.endpoint as Endpoint, {
          maxRequests: config.maxRequestsPerBatch,
          maxLineBytes: config.maxLineBytes,
        });
      } catch (err) {
        await rm(paths.dir, { recursive: true, force: true });
        throw err;
      }
      const created = now();
      const batch = newBatchObject({ id, ...input, inputFileId, created, windowSeconds, validation: v, registry: this.deps.registry });
      const rec: BatchRecord = { batch, owner: input.owner, seq: store.nextSeq() };
      if (input.output_expires_after) rec.outputExpiresAfter = input.output_expires_after;
      store.add(rec);
      try {
        await store.save(id);
      } catch (err) {
        store.discard(id);
        await rm(paths.dir, { recursive: true, force: true });
        throw err;
      }
      const accepted = snapshot(batch);
      if (batch.status === "failed") this.deps.metrics?.batchEnded(batch);
      // A cancel may have ended it while the state was written.
      if (batch.status === "validating" && !this.deps.runner.isEnding(id)) this.schedule(rec);
      logger.info(
        { batch_id: id, status: batch.status, total: v.total, errors: v.errorCount, deadline_at: batch.deadline_at, queued: queue.depth },
        batch.status === "validating" ? "batch accepted and queued" : "batch failed validation",
      );
      return accepted;
    } finally {
      this.reserved--;
    }
  }
}

const snapshot = (b: Batch): Batch => structuredClone(b);
