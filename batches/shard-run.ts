// Runs one claimed shard: its byte range of the input comes from the blob store, the parts it already committed
// (an earlier worker's checkpoints) are read back as done, and every CHECKPOINT_SECONDS the new whole result lines
// go up as a part and are committed under the shard's epoch. Fenced (the lease taken over): it stops, and what
// it has not committed never counts.
import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, open, rm, stat } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import type pino from "pino";
import { servedEndpoint } from "../domain/batch-object.js";
import type { InferenceBackend } from "../openai/backend.js";
import { scanDone, scanResultText } from "../pipeline/resume.js";
import { runBatchFile } from "../pipeline/run-batch.js";
import type { LineOrder } from "../pipeline/schedule.js";
import type { AbortReason, Progress } from "../pipeline/types.js";
import { partKey } from "../state/blob-layout.js";
import { OutageLog } from "../state/outage-log.js";
import { type ClaimedShard, type CommitResult, type ShardCommit, type ShardPart, shardKey, type WorkQueue } from "../state/ports.js";
import type { BlobStore } from "../stores/blob-store.js";

export type ShardEnd = "done" | "handed_back" | "fenced";

/** One claimed shard's run, however its results are kept (parts in the blob store, or files appended in place). */
export interface ShardExecution {
  readonly key: string;
  readonly shard: ClaimedShard;
  /**
   * Runs to the end. `backend` is absent for a run that only writes the error lines of a stopped batch (the
   * signal is then already aborted). A "shutdown" abort hands the shard back after a last checkpoint.
   * `onProgress` hears first where the run starts (what is already done), then every change.
   */
  run(
    backend: InferenceBackend | undefined,
    signal: AbortSignal,
    drain?: AbortSignal,
    onProgress?: (p: Progress) => void,
  ): Promise<ShardEnd>;
  /** The shard's lease was taken over: the run stops and commits nothing more. */
  lose(reason: AbortReason): void;
}

export type StartShardRun = (shard: ClaimedShard) => ShardExecution;

/** The shard cannot run anywhere (its input or a committed part is gone): its batch fails. */
export class ShardFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ShardFailure";
  }
}

export interface ShardRunDeps {
  queue: WorkQueue;
  blobs: BlobStore;
  /** Local scratch space of this process. */
  scratchDir: string;
  checkpointSeconds: number;
  leaseSeconds: number;
  batchSize: number;
  concurrency: number;
  order: LineOrder;
  logger: pino.Logger;
  /** A write met a full or read-only disk (the process's storage state turns; /ready says so). */
  onStorageFault?: (err: unknown) => void;
}

const RETRY_MS = 1_000;

/** Engine time: each commit carries the seconds since the one before, from when the run started computing. */
export class EngineClock {
  private mark = performance.now();

  start(): void {
    this.mark = performance.now();
  }

  /** Seconds since the last lap (or the start). */
  lap(): number {
    const now = performance.now();
    const seconds = (now - this.mark) / 1000;
    this.mark = now;
    return seconds;
  }
}

/** One checkpoint's upload: its part, the counts of exactly its lines, and where it ends in the local files. */
interface Attempt {
  n: number;
  commit: ShardCommit;
  ends: { output: number; errors: number };
}

/**
 * How a run ends, whatever keeps its results: what it wrote is committed first (retried until it lands, or until
 * the shard turns out fenced); then a shutdown hands the shard back, anything else marks it finished.
 */
export async function endShard(
  run: { readonly fenced: boolean; readonly key: string; readonly shard: ClaimedShard },
  deps: { queue: WorkQueue; logger: pino.Logger },
  aborted: AbortReason | undefined,
  flush: () => Promise<CommitResult | "failed">,
): Promise<ShardEnd> {
  if (run.fenced) return "fenced";
  while ((await flush()) !== "committed") {
    if (run.fenced) return "fenced";
    await sleep(RETRY_MS);
  }
  if (aborted?.code === "shutdown") {
    await deps.queue.handBack(run.shard);
    return "handed_back";
  }
  for (;;) {
    try {
      return (await deps.queue.finish(run.shard)) === "committed" ? "done" : "fenced";
    } catch (err) {
      deps.logger.warn({ err: (err as Error).message, shard: run.key }, "cannot mark the shard finished yet; retrying");
      await sleep(RETRY_MS);
    }
  }
}

export class ShardRun implements ShardExecution {
  private readonly dir: string;
  private readonly files: { input: string; output: string; errors: string };
  /** Bytes of each local result file already committed (or read back from committed parts). */
  private readonly sent = { output: 0, errors: 0 };
  private checkpointing: Promise<CommitResult> | undefined;
  /** A commit sent whose reply never came: it is resolved before anything new is uploaded. */
  private unresolved: Attempt | undefined;
  private lost = false;
  /** Checkpoint failures, said when they start and when they end. */
  private readonly outage: OutageLog;
  /** Aborted when the shard is found fenced, so the run stops at once. */
  readonly fence = new AbortController();
  private readonly clock = new EngineClock();

  constructor(
    private readonly deps: ShardRunDeps,
    readonly shard: ClaimedShard,
  ) {
    this.dir = path.join(deps.scratchDir, `${shard.batchId}-${shard.idx}-${shard.epoch}`);
    this.files = {
      input: path.join(this.dir, "input.jsonl"),
      output: path.join(this.dir, "output.jsonl"),
      errors: path.join(this.dir, "errors.jsonl"),
    };
    this.outage = new OutageLog(deps.logger, "checkpoint");
  }

  get key(): string {
    return shardKey(this.shard);
  }

  /** Its lease was taken over: it commits nothing more. */
  get fenced(): boolean {
    return this.lost;
  }

  async run(
    backend: InferenceBackend | undefined,
    signal: AbortSignal,
    drain?: AbortSignal,
    onProgress?: (p: Progress) => void,
  ): Promise<ShardEnd> {
    const { deps, shard } = this;
    await mkdir(this.dir, { recursive: true });
    try {
      await this.fetchInput();
      const base = await this.fetchCommitted();
      onProgress?.({ completed: base.completed, failed: base.failed, usage: { ...base.usage }, cached: { ...base.cached! } });
      this.clock.start();
      const timer = setInterval(() => void this.checkpoint().catch((err) => this.failed(err)), deps.checkpointSeconds * 1000);
      timer.unref();
      let result: Awaited<ReturnType<typeof runBatchFile>>;
      try {
        result = await runBatchFile({
          inputPath: this.files.input,
          outputPath: this.files.output,
          errorPath: this.files.errors,
          endpoint: servedEndpoint(shard.endpoint),
          backend,
          batchSize: deps.batchSize,
          concurrency: deps.concurrency,
          order: deps.order,
          done: base.done,
          base,
          signal: AbortSignal.any([signal, this.fence.signal]),
          drain,
          onProgress,
        });
      } finally {
        clearInterval(timer);
      }
      // Everything written goes up before the shard ends or is handed back; storage that is down is waited for.
      return await endShard(this, deps, result.aborted, () => this.checkpointUntilFlushed());
    } finally {
      await rm(this.dir, { recursive: true, force: true });
    }
  }

  lose(reason: AbortReason): void {
    this.lost = true;
    this.fence.abort(reason);
  }

  /** One checkpoint at a time; a tick that finds one under way waits for it. */
  checkpoint(): Promise<CommitResult> {
    this.checkpointing ??= this.checkpointOnce().finally(() => (this.checkpointing = undefined));
    return this.checkpointing;
  }

  private async checkpointUntilFlushed(): Promise<CommitResult | "failed"> {
    try {
      await this.checkpointing?.catch(() => undefined);
      return await this.checkpoint();
    } catch (err) {
      this.failed(err);
      return "failed";
    }
  }

  /** A checkpoint that failed is tried again at the next tick; said once per outage, not once per tick. */
  private failed(err: unknown): void {
    this.outage.failed(err, { shard: this.key, unresolved: this.unresolved !== undefined });
  }

  private async checkpointOnce(): Promise<CommitResult> {
    const { deps, shard } = this;
    for (;;) {
      if (this.lost) return "fenced";
      // A commit whose outcome is unknown (its reply lost) is sent again exactly as it was before anything new is
      // written: the queue recognises its part if it landed, and refuses it if the shard was taken over meanwhile.
      // Once it is resolved, the lines written since go up too (a flush means everything).
      const resolving = this.unresolved !== undefined;
      const attempt = this.unresolved ?? (await this.upload());
      if (!attempt) return "committed";
      this.unresolved = attempt;
      const result = await deps.queue.commit(shard, attempt.commit, deps.leaseSeconds);
      this.unresolved = undefined;
      if (result === "fenced") {
        await this.discard(attempt.commit.part);
        this.lose({ code: "shutdown", message: "The shard's lease was taken over by another worker." });
        return result;
      }
      this.outage.ok();
      shard.checkpoints = attempt.n;
      shard.parts.push(attempt.commit.part);
      this.sent.output = attempt.ends.output;
      this.sent.errors = attempt.ends.errors;
      if (!resolving) return result;
    }
  }

  /** Uploads the lines written since the last commit under keys of their own; undefined when there are none. */
  private async upload(): Promise<Attempt | undefined> {
    const { deps, shard } = this;
    const n = shard.checkpoints + 1;
    const out = await this.pending("output");
    const err = await this.pending("errors");
    if (out.bytes.length === 0 && err.bytes.length === 0) return undefined;
    const tag = randomBytes(4).toString("hex");
    const part: ShardPart = {};
    if (out.bytes.length > 0) {
      part.output = partKey(shard, n, "output", tag);
      await deps.blobs.put(part.output, Readable.from([out.bytes]));
    }
    if (err.bytes.length > 0) {
      part.errors = partKey(shard, n, "errors", tag);
      await deps.blobs.put(part.errors, Readable.from([err.bytes]));
    }
    // Counts come from the bytes uploaded, so what the batch counts is what its parts hold.
    const counts = await scanResultText(out.bytes.toString("utf8"), err.bytes.toString("utf8"));
    return {
      n,
      commit: {
        part,
        completed: counts.completed,
        failed: counts.failed,
        usage: counts.usage,
        cached: counts.cached,
        seconds: this.clock.lap(),
      },
      ends: { output: out.end, errors: err.end },
    };
  }

  /** A part that never counted: removed now (finalizing removes any that a crash leaves behind). */
  private async discard(part: ShardPart): Promise<void> {
    for (const key of [part.output, part.errors]) if (key) await this.deps.blobs.delete(key).catch(() => undefined);
  }

  /** The whole lines written to a local result file since the last commit (a line being written waits). */
  private async pending(kind: "output" | "errors"): Promise<{ bytes: Buffer; end: number }> {
    const from = this.sent[kind];
    const size = await stat(this.files[kind]).then(
      (s) => s.size,
      () => 0,
    );
    if (size <= from) return { bytes: Buffer.alloc(0), end: from };
    const fh = await open(this.files[kind], "r");
    try {
      const buf = Buffer.alloc(size - from);
      const { bytesRead } = await fh.read(buf, 0, buf.length, from);
      const cut = buf.subarray(0, bytesRead).lastIndexOf(0x0a) + 1;
      return { bytes: buf.subarray(0, cut), end: from + cut };
    } finally {
      await fh.close();
    }
  }

  private async fetchInput(): Promise<void> {
    const { shard } = this;
    const blob = await this.deps.blobs.open(shard.inputKey, { start: shard.byteStart, end: shard.byteEnd });
    if (!blob) throw new ShardFailure(`the batch's input '${shard.inputKey}' is gone from storage`);
    await pipeline(blob.content, createWriteStream(this.files.input));
  }

  /** Downloads the committed parts into the local result files: their lines are done and are never run again. */
  private async fetchCommitted(): Promise<Progress & { done: Set<string> }> {
    for (const part of this.shard.parts) {
      for (const kind of ["output", "errors"] as const) {
        const key = part[kind];
        if (!key) continue;
        const blob = await this.deps.blobs.open(key);
        if (!blob) throw new ShardFailure(`a committed result part '${key}' is gone from storage`);
        await pipeline(blob.content, createWriteStream(this.files[kind], { flags: "a" }));
      }
    }
    this.sent.output = await stat(this.files.output).then(
      (s) => s.size,
      () => 0,
    );
    this.sent.errors = await stat(this.files.errors).then(
      (s) => s.size,
      () => 0,
    );
    return scanDone(this.files.output, this.files.errors);
  }
}
