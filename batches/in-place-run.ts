// Runs a claimed shard where its results are kept: in files of the local blob store, appended as requests finish,
// as one machine runs a batch. Every whole line on disk is done and is never run again, however the
// last run ended (kill -9 included); counts are committed once the lines they count are on stable storage (the
// files are flushed every 200 ms), and a run recounts the files as it starts: what its predecessor wrote but never
// counted is committed then, and what a power cut took from the files (lines written, never flushed) is uncounted
// and runs again. A local failure other than a full disk (a file that cannot be
// written) fails the batch, as it would fail anywhere. For one process over its own folder only: a second run of
// the same shard waits for the first to end.

import { createWriteStream } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import type pino from "pino";
import { servedEndpoint } from "../domain/batch-object.js";
import type { InferenceBackend } from "../openai/backend.js";
import { repairTornTail, scanDone } from "../pipeline/resume.js";
import { runBatchFile } from "../pipeline/run-batch.js";
import type { LineOrder } from "../pipeline/schedule.js";
import type { AbortReason, Progress } from "../pipeline/types.js";
import { batchKeys } from "../state/blob-layout.js";
import { type ClaimedShard, type CommitResult, type ShardPart, shardKey, type WorkQueue } from "../state/ports.js";
import { isStorageFull } from "../stores/errors.js";
import type { FsBlobStore } from "../stores/fs-blob-store.js";
import { EngineClock, endShard, type ShardEnd, type ShardExecution, ShardFailure } from "./shard-run.js";

/** A run paused by a full disk looks for space this often, and goes on once this much is free. */
const SPACE_POLL_MS = 2_000;
const RESUME_FREE_BYTES = 1024 * 1024;
/** How often the result files are flushed (fdatasync) while requests finish: what the counts may lag by. */
const SYNC_EVERY_MS = 200;

export interface InPlaceRunDeps {
  queue: WorkQueue;
  blobs: FsBlobStore;
  /** Local scratch space (a shard that is part of its input is copied there). */
  scratchDir: string;
  leaseSeconds: number;
  batchSize: number;
  concurrency: number;
  order: LineOrder;
  logger: pino.Logger;
  onStorageFault?: (err: unknown) => void;
  /** Runs under way in this process, by shard: a new run of one waits for the old to end. */
  active: Map<string, Promise<unknown>>;
}

export class InPlaceShardRun implements ShardExecution {
  private readonly fence = new AbortController();
  private lost = false;
  private latest: Progress | undefined;
  private committing: Promise<CommitResult> | undefined;
  /** Progress arrived while a commit was under way: another follows it. */
  private dirty = false;
  private readonly clock = new EngineClock();

  constructor(
    private readonly deps: InPlaceRunDeps,
    readonly shard: ClaimedShard,
  ) {}

  get key(): string {
    return shardKey(this.shard);
  }

  get fenced(): boolean {
    return this.lost;
  }

  lose(reason: AbortReason): void {
    this.lost = true;
    this.fence.abort(reason);
  }

  run(
    backend: InferenceBackend | undefined,
    signal: AbortSignal,
    drain?: AbortSignal,
    onProgress?: (p: Progress) => void,
  ): Promise<ShardEnd> {
    const before = this.deps.active.get(this.key) ?? Promise.resolve();
    const mine = before.catch(() => undefined).then(() => this.runAlone(backend, signal, drain, onProgress));
    this.deps.active.set(this.key, mine);
    const forget = () => {
      if (this.deps.active.get(this.key) === mine) this.deps.active.delete(this.key);
    };
    mine.then(forget, forget);
    return mine;
  }

  private async runAlone(
    backend: InferenceBackend | undefined,
    signal: AbortSignal,
    drain?: AbortSignal,
    onProgress?: (p: Progress) => void,
  ): Promise<ShardEnd> {
    const { deps } = this;
    const files = await this.files();
    const stop = AbortSignal.any([signal, this.fence.signal]);
    let aborted: AbortReason | undefined;
    try {
      for (;;) {
        try {
          aborted = await this.runFile(files, backend, stop, drain, onProgress);
          break;
        } catch (err) {
          if (!isStorageFull(err) || stop.aborted || drain?.aborted) throw this.failure(err, stop);
          await this.waitForSpace(err, drain ? AbortSignal.any([stop, drain]) : stop);
        }
      }
    } finally {
      if (files.scratch) await rm(files.scratch, { recursive: true, force: true });
    }
    return endShard(this, deps, aborted, () => this.commitUntilFlushed(files));
  }

  /** Whatever is on disk counts as done (a torn last line is cut off first); the rest runs, appended. */
  private async runFile(
    files: ShardFiles,
    backend: InferenceBackend | undefined,
    signal: AbortSignal,
    drain?: AbortSignal,
    onProgress?: (p: Progress) => void,
  ): Promise<AbortReason | undefined> {
    await repairTornTail(files.output.path);
    await repairTornTail(files.errors.path);
    const { done, ...base } = await scanDone(files.output.path, files.errors.path);
    this.latest = base;
    // What is on disk but was never counted (a predecessor died first) is counted now, not at the first request.
    this.commitSoon(files);
    onProgress?.({ completed: base.completed, failed: base.failed, usage: { ...base.usage }, cached: { ...base.cached! } });
    const result = await runBatchFile({
      inputPath: files.input,
      outputPath: files.output.path,
      errorPath: files.errors.path,
      endpoint: servedEndpoint(this.shard.endpoint),
      backend,
      batchSize: this.deps.batchSize,
      concurrency: this.deps.concurrency,
      order: this.deps.order,
      done,
      base,
      signal,
      drain,
      // Counted only once on stable storage (a power cut keeps every line counted), the flushes grouped.
      syncEveryMs: SYNC_EVERY_MS,
      onProgress: (p) => {
        this.latest = p;
        this.commitSoon(files);
        onProgress?.(p);
      },
    });
    this.latest = result;
    return result.aborted;
  }

  /** A local failure fails the batch (ShardFailure); one met while stopping is the stop's. */
  private failure(err: unknown, stop: AbortSignal): unknown {
    if (stop.aborted || err instanceof ShardFailure) return err;
    return new ShardFailure(`the batch's files cannot be written: ${(err as Error)?.message ?? err}`);
  }

  /** Commits now, or right after the commit under way. */
  private commitSoon(files: ShardFiles): void {
    if (this.committing) {
      this.dirty = true;
      return;
    }
    void this.commit(files)
      .catch(() => undefined)
      .finally(() => {
        if (!this.dirty) return;
        this.dirty = false;
        this.commitSoon(files);
      });
  }

  private async waitForSpace(err: unknown, stop: AbortSignal) {
    const { logger, blobs } = this.deps;
    this.deps.onStorageFault?.(err);
    logger.warn(
      { err, shard: this.key, progress: this.latest },
      "the disk is full: the batch is paused, what it wrote is kept, and it goes on once space is freed",
    );
    while (!stop.aborted && !(await blobs.hasFreeSpace(RESUME_FREE_BYTES)))
      await sleep(SPACE_POLL_MS, undefined, { signal: stop }).catch(() => undefined);
    if (!stop.aborted) logger.info({ shard: this.key }, "disk space is back: the paused batch goes on");
  }

  private async commitUntilFlushed(files: ShardFiles): Promise<CommitResult | "failed"> {
    try {
      await this.committing?.catch(() => undefined);
      return await this.commit(files);
    } catch (err) {
      this.deps.logger.warn({ err: (err as Error).message, shard: this.key }, "cannot commit the shard's counts; retrying");
      return "failed";
    }
  }

  /** One commit at a time: what was counted since the last one, and the result files the first time they have lines. */
  private commit(files: ShardFiles): Promise<CommitResult> {
    this.committing ??= this.commitOnce(files).finally(() => (this.committing = undefined));
    return this.committing;
  }

  private async commitOnce(files: ShardFiles): Promise<CommitResult> {
    const { shard } = this;
    const now = this.latest;
    if (this.lost) return "fenced";
    if (!now) return "committed";
    const was = shard.counted;
    const part: ShardPart = {};
    // A result file becomes a part once it has lines (looked at only until then: no disk access per request after).
    for (const kind of ["output", "errors"] as const) {
      const f = files[kind];
      const some = kind === "output" ? now.completed > 0 : now.failed > 0;
      if (some && !shard.parts.some((p) => p[kind] === f.key) && ((await this.deps.blobs.size(f.key)) ?? 0) > 0) part[kind] = f.key;
    }
    const delta = {
      completed: now.completed - was.completed,
      failed: now.failed - was.failed,
      usage: {
        promptTokens: now.usage.promptTokens - was.usage.promptTokens,
        cachedTokens: now.usage.cachedTokens - was.usage.cachedTokens,
        completionTokens: now.usage.completionTokens - was.usage.completionTokens,
      },
      cached: {
        lines: (now.cached?.lines ?? 0) - (was.cached?.lines ?? 0),
        outputTokens: (now.cached?.outputTokens ?? 0) - (was.cached?.outputTokens ?? 0),
      },
    };
    const nothing = [delta.completed, delta.failed, ...Object.values(delta.usage), ...Object.values(delta.cached)].every((n) => n === 0);
    if (nothing && !part.output && !part.errors) return "committed";
    const result = await this.deps.queue.commit(
      shard,
      { part, ...delta, seconds: this.clock.lap(), recountable: true },
      this.deps.leaseSeconds,
    );
    if (result === "fenced") {
      this.lose({ code: "shutdown", message: "The shard's lease was taken over." });
      return result;
    }
    shard.checkpoints++;
    if (part.output || part.errors) shard.parts.push(part);
    shard.counted = {
      completed: now.completed,
      failed: now.failed,
      usage: { ...now.usage },
      cached: { lines: now.cached?.lines ?? 0, outputTokens: now.cached?.outputTokens ?? 0 },
    };
    return result;
  }

  /**
   * Where this shard's results go: a batch of one shard writes BATCH_DIR/<batch_id>/output.jsonl and errors.jsonl
   * themselves (finalizing then only records them); a shard of a larger batch writes its own pair, assembled at
   * the end. A shard that is part of its input reads a copy of its range.
   */
  private async files(): Promise<ShardFiles> {
    const { blobs } = this.deps;
    const s = this.shard;
    const size = await blobs.size(s.inputKey);
    if (size === undefined) throw new ShardFailure(`the batch's input '${s.inputKey}' is gone from storage`);
    const whole = s.byteStart === 0 && s.byteEnd >= size;
    const keys = whole
      ? batchKeys(s.batchId)
      : { output: `${batchKeys(s.batchId).shards}${s.idx}/output.jsonl`, errors: `${batchKeys(s.batchId).shards}${s.idx}/errors.jsonl` };
    const output = { key: keys.output, path: blobs.localPath(keys.output) };
    const errors = { key: keys.errors, path: blobs.localPath(keys.errors) };
    await mkdir(path.dirname(output.path), { recursive: true });
    if (whole) return { input: blobs.localPath(s.inputKey), output, errors };
    const scratch = path.join(this.deps.scratchDir, `${s.batchId}-${s.idx}-${s.epoch}`);
    await mkdir(scratch, { recursive: true });
    const input = path.join(scratch, "input.jsonl");
    const range = await blobs.open(s.inputKey, { start: s.byteStart, end: s.byteEnd });
    await pipeline(range!.content, createWriteStream(input));
    return { input, output, errors, scratch };
  }
}

interface ShardFiles {
  input: string;
  output: { key: string; path: string };
  errors: { key: string; path: string };
  /** A scratch folder to remove after the run. */
  scratch?: string;
}
