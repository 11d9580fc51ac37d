// Batches: an in-memory index backed by BATCH_DIR/<batch_id>/batch.json, one atomically replaced
// document per batch. Everything is loaded on start; only folders named like a batch id are read.
import { mkdir, readdir, rm } from "node:fs/promises";
import path from "node:path";
import type pino from "pino";
import type { ExpiresAfter, Owner, Page } from "../contracts.js";
import { BatchSchema, type Batch } from "../schemas/objects.js";
import { readJsonFile, writeJsonAtomic } from "./atomic-json.js";
import { FsBlobStore } from "./fs-blob-store.js";
import { BATCH_ID_RE } from "./ids.js";
import { paginate } from "./paginate.js";

export interface BatchRecord {
  batch: Batch;
  owner: Owner;
  /** Monotonic submission order; recovery requeues by it and lists sort by it. */
  seq: number;
  /** Retention of the output and error files (output_expires_after); absent: the default file expiry. */
  outputExpiresAfter?: ExpiresAfter;
}

export interface BatchPaths {
  dir: string;
  input: string;
  output: string;
  errors: string;
  state: string;
}

export function batchPaths(batchDir: string, id: string): BatchPaths {
  const dir = path.join(batchDir, id);
  return {
    dir,
    input: path.join(dir, "input.jsonl"),
    output: path.join(dir, "output.jsonl"),
    errors: path.join(dir, "errors.jsonl"),
    state: path.join(dir, "batch.json"),
  };
}

export interface BatchStoreOptions {
  batchDir: string;
  logger: pino.Logger;
  /** Progress writes of one batch are coalesced to at most one per this many ms. */
  throttleMs?: number;
}

export class BatchStore {
  private readonly records = new Map<string, BatchRecord>();
  /** Per-batch write chains, so writes of one batch.json land in order. */
  private readonly writes = new Map<string, Promise<void>>();
  private readonly pendingTouches = new Map<string, NodeJS.Timeout>();
  private lastSeq = 0;
  private closed = false;

  private constructor(private readonly opts: BatchStoreOptions) {}

  static async open(opts: BatchStoreOptions): Promise<BatchStore> {
    const store = new BatchStore(opts);
    await mkdir(opts.batchDir, { recursive: true });
    await store.load();
    return store;
  }

  paths(id: string): BatchPaths {
    return batchPaths(this.opts.batchDir, id);
  }

  nextSeq(): number {
    return ++this.lastSeq;
  }

  /** Adds a new batch to the index; call save() to make it durable. */
  add(rec: BatchRecord): void {
    if (this.records.has(rec.batch.id)) throw new Error(`batch ${rec.batch.id} already exists`);
    this.records.set(rec.batch.id, rec);
  }

  /**
   * Deletes a batch for good: its state first (a crash then leaves a folder without batch.json,
   * which start-up cleans away), then its folder. Writes under way land before the delete.
   */
  async remove(id: string): Promise<void> {
    const timer = this.pendingTouches.get(id);
    if (timer) clearTimeout(timer);
    this.pendingTouches.delete(id);
    // With the record gone, any later save() of this id writes nothing.
    this.records.delete(id);
    await this.writes.get(id)?.catch(() => undefined);
    const p = this.paths(id);
    await rm(p.state, { force: true });
    await rm(p.dir, { recursive: true, force: true });
  }

  /** Drops a batch whose creation failed before it was ever made durable. */
  discard(id: string): void {
    this.records.delete(id);
  }

  /** A deleted or expired file is no longer any batch's output or error file. */
  async forgetFile(fileId: string): Promise<void> {
    for (const rec of this.records.values()) {
      const b = rec.batch;
      if (b.output_file_id !== fileId && b.error_file_id !== fileId) continue;
      if (b.output_file_id === fileId) b.output_file_id = null;
      if (b.error_file_id === fileId) b.error_file_id = null;
      await this.save(b.id);
    }
  }

  /**
   * Whether a batch paused by a full disk can go on: at least `minBytes` free (and an inode) where batches
   * live. When the filesystem cannot say (a quota, say), true: the next write tells.
   */
  hasFreeSpace(minBytes: number): Promise<boolean> {
    return new FsBlobStore(this.opts.batchDir).hasFreeSpace(minBytes);
  }

  /** Owner-scoped when `owner` is given; another owner's batch is not found. */
  get(id: string, owner?: Owner): BatchRecord | undefined {
    const rec = this.records.get(id);
    if (!rec || (owner !== undefined && rec.owner !== owner)) return undefined;
    return rec;
  }

  /** All batches, oldest submission first. */
  all(): BatchRecord[] {
    return [...this.records.values()].sort((a, b) => a.seq - b.seq);
  }

  /** Newest first, as OpenAI lists batches. */
  list(q: { after?: string; limit: number; owner: Owner }): Page<Batch> {
    const sorted = [...this.records.values()]
      .filter((r) => r.owner === q.owner)
      .sort((a, b) => b.seq - a.seq)
      .map((r) => r.batch);
    return paginate(sorted, (b) => b.id, q);
  }

  /** Writes the batch's current state now (after any write already under way). */
  save(id: string): Promise<void> {
    const timer = this.pendingTouches.get(id);
    if (timer) {
      clearTimeout(timer);
      this.pendingTouches.delete(id);
    }
    if (this.closed) return Promise.resolve();
    return this.queueWrite(id, () => this.writeNow(id));
  }

  /**
   * Writes `next` as the batch's state and only then makes it the batch everyone sees: a status a client
   * has read is always the status on disk. Rejects (the live batch unchanged) when the write fails.
   */
  commit(id: string, next: Batch): Promise<void> {
    const rec = this.records.get(id);
    if (!rec) return Promise.resolve();
    if (this.closed) return Promise.reject(new Error("the batch store is closed"));
    return this.queueWrite(id, async () => {
      await writeJsonAtomic(this.paths(id).state, { ...this.document(rec), batch: next });
      Object.assign(rec.batch, next);
    });
  }

  /** Runs `write` after any write of the batch already under way, so its writes land in order. */
  private queueWrite(id: string, write: () => Promise<void>): Promise<void> {
    const prev = this.writes.get(id) ?? Promise.resolve();
    const done = prev.catch(() => undefined).then(write);
    this.writes.set(id, done);
    const forget = () => {
      if (this.writes.get(id) === done) this.writes.delete(id);
    };
    done.then(forget, forget);
    return done;
  }

  /** Schedules a save within throttleMs unless one is already scheduled (progress updates). */
  touch(id: string): void {
    if (this.closed || this.pendingTouches.has(id)) return;
    const timer = setTimeout(() => {
      this.pendingTouches.delete(id);
      this.save(id).catch((err) => this.opts.logger.error({ err, batch_id: id }, "cannot persist batch progress"));
    }, this.opts.throttleMs ?? 500);
    timer.unref();
    this.pendingTouches.set(id, timer);
  }

  /** Flushes scheduled and running writes; later saves are ignored (a stopped plane must not overwrite a successor's state). */
  async close(): Promise<void> {
    const touched = [...this.pendingTouches.keys()];
    for (const id of touched) this.save(id).catch(() => undefined);
    this.closed = true;
    await Promise.allSettled([...this.writes.values()]);
  }

  private async writeNow(id: string) {
    const rec = this.records.get(id);
    if (!rec) return;
    await writeJsonAtomic(this.paths(id).state, this.document(rec));
  }

  private document(rec: BatchRecord) {
    const { owner, seq, outputExpiresAfter, batch } = rec;
    return { version: 1, owner, seq, output_expires_after: outputExpiresAfter, batch };
  }

  private async load() {
    const entries = await readdir(this.opts.batchDir, { withFileTypes: true });
    for (const e of entries) {
      if (!e.isDirectory() || !BATCH_ID_RE.test(e.name)) continue;
      const file = this.paths(e.name).state;
      try {
        const raw = (await readJsonFile(file)) as any;
        if (raw === undefined) continue; // a folder whose creation never completed
        const batch = BatchSchema.parse(raw.batch);
        if (batch.id !== e.name) throw new Error(`batch.json names ${batch.id}`);
        const seq = Number.isSafeInteger(raw.seq) ? raw.seq : 0;
        const rec: BatchRecord = { batch, owner: raw.owner ?? null, seq };
        const retention = raw.output_expires_after;
        if (retention?.anchor === "created_at" && Number.isSafeInteger(retention.seconds)) rec.outputExpiresAfter = retention;
        this.records.set(batch.id, rec);
        this.lastSeq = Math.max(this.lastSeq, seq);
      } catch (err) {
        this.opts.logger.warn({ err, file }, "skipping unreadable batch state");
      }
    }
  }
}
