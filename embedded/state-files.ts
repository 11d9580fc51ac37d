// Makes the in-process state durable in BATCH_DIR's own layout: a batch's record (its shards, parts and counts)
// is <batch_id>/batch.json beside its files, a file's record files/<file_id>.json, each replaced atomically after
// every change that must survive the process and read back when the state is opened. Writes of one document are
// chained, and a write waiting its turn takes the record as it is by then, so bursts of changes coalesce. Only
// names this service creates are looked at, since BATCH_DIR is often a shared folder such as /tmp. Records
// written by earlier versions (version 1: a batch with no shards) are read too: an unfinished one resumes in place.
import { mkdir, readdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import type pino from "pino";
import { isFinal } from "../domain/batch-state.js";
import { BATCH_ID_RE, FILE_ID_RE, SYNC_USAGE_ID_RE } from "../domain/ids.js";
import { type Batch, BatchSchema, FileObjectSchema } from "../domain/objects.js";
import type { UsageRecord } from "../domain/usage.js";
import { withCounts } from "../state/batch-doc.js";
import { batchKeys } from "../state/blob-layout.js";
import { endTotals } from "../state/totals.js";
import { readJsonFile, writeJsonAtomic } from "../stores/atomic-json.js";
import { pruneEmpty, uploadDir } from "../stores/fs-blob-store.js";
import { inDir } from "../stores/in-dir.js";
import type { BatchEntry, FileEntry, MemoryState, StateStore } from "./state.js";

const VERSION = 2;

export class StateFiles implements StateStore {
  private readonly chains = new Map<string, { pending?: Promise<void>; tail?: Promise<void> }>();

  constructor(
    private readonly root: string,
    private readonly logger: pino.Logger,
  ) {}

  private get filesDir() {
    return path.join(this.root, "files");
  }

  private batchDoc(id: string) {
    return path.join(this.root, id, "batch.json");
  }

  private get usageDir() {
    return path.join(this.root, "usage");
  }

  async open(): Promise<void> {
    await mkdir(this.filesDir, { recursive: true });
  }

  /** A usage record no batch holds: usage/<id>.json (a deleted batch's, or a minute of synchronous requests'). */
  async saveUsage(record: UsageRecord): Promise<void> {
    await mkdir(this.usageDir, { recursive: true });
    await writeJsonAtomic(path.join(this.usageDir, `${record.batchId}.json`), record);
  }

  saveBatch(state: MemoryState, id: string, next?: BatchEntry | null): Promise<void> {
    const file = this.batchDoc(id);
    return this.write(`b:${id}`, next === undefined, async () => {
      const e = next === undefined ? state.batches.get(id) : next;
      if (!e) {
        await rm(file, { force: true });
        return pruneEmpty(path.dirname(file), this.root);
      }
      // The batch as clients see it (live counts merged), so the record reads as the batch it is.
      const doc = { version: VERSION, ...e, batch: withCounts(e.batch, e.counts, e.models) };
      await inDir(path.dirname(file), () => writeJsonAtomic(file, doc));
    });
  }

  saveFile(state: MemoryState, id: string, next?: FileEntry | null): Promise<void> {
    const file = path.join(this.filesDir, `${id}.json`);
    return this.write(`f:${id}`, next === undefined, async () => {
      const f = next === undefined ? state.files.get(id) : next;
      if (!f) return rm(file, { force: true });
      // Created again if need be: the blob store prunes folders it leaves empty.
      await inDir(this.filesDir, () => writeJsonAtomic(file, { version: VERSION, ...f }));
    });
  }

  /** Reads every record into `state`; unreadable ones are skipped with a warning. */
  async load(state: MemoryState): Promise<void> {
    let seq = 0;
    for (const e of await readdir(this.root, { withFileTypes: true })) {
      if (!e.isDirectory() || !BATCH_ID_RE.test(e.name)) continue;
      const entry = await this.read(this.batchDoc(e.name), (raw) => this.batchEntry(e.name, raw));
      if (!entry) continue;
      state.batches.set(entry.batch.id, entry);
      state.addTotals(endTotals(null, withCounts(entry.batch, entry.counts, entry.models), entry.owner));
      seq = Math.max(seq, entry.seq);
    }
    const files: FileEntry[] = [];
    for (const name of await readdir(this.filesDir)) {
      const id = name.replace(/\.json$/, "");
      if (!name.endsWith(".json") || !FILE_ID_RE.test(id)) continue;
      const f = await this.read(path.join(this.filesDir, name), (raw) => fileEntry(id, raw));
      if (f) files.push(f);
    }
    // Version 1 recorded no order for files: theirs follows their creation, after everything numbered.
    files.sort(
      (a, b) => (a.seq || Number.MAX_SAFE_INTEGER) - (b.seq || Number.MAX_SAFE_INTEGER) || a.object.created_at - b.object.created_at,
    );
    for (const f of files) {
      f.seq ||= seq + 1;
      seq = Math.max(seq, f.seq);
      state.files.set(f.object.id, f);
    }
    state.advanceSeq(seq);
    const usage = await readdir(this.usageDir).catch(() => [] as string[]);
    for (const name of usage) {
      const id = name.slice(0, -5);
      if (!name.endsWith(".json") || !(BATCH_ID_RE.test(id) || SYNC_USAGE_ID_RE.test(id))) continue;
      const record = await this.read(path.join(this.usageDir, name), (raw) => raw as UsageRecord);
      if (record) state.usageArchive.set(record.batchId, record);
    }
  }

  /** Waits for every write under way. */
  async flush(): Promise<void> {
    await Promise.allSettled([...this.chains.values()].map((c) => c.tail));
  }

  private async batchEntry(id: string, raw: any): Promise<BatchEntry> {
    const batch = BatchSchema.parse(raw.batch);
    if (batch.id !== id) throw new Error(`batch.json names ${batch.id}`);
    if (raw.version === VERSION) {
      if (!Array.isArray(raw.shards) || typeof raw.counts?.completed !== "number") throw new Error("not a batch record");
      const { version: _, ...entry } = raw;
      // A batch left cancelling ends cancelled, whoever decided it.
      const counts = { spotSeconds: 0, dedicatedSeconds: 0, ...entry.counts };
      return { ...entry, batch, counts, stopReason: entry.stopReason ?? (batch.status === "cancelling" ? "cancelled" : null) };
    }
    if (raw.version !== 1) throw new Error(`unknown document version ${raw.version}`);
    return this.fromVersion1(batch, raw);
  }

  /**
   * A batch as version 1 kept it: the batch object, its owner, order and retention, its files in its folder. An
   * unfinished one becomes one shard over its whole input, whose result files are its parts, counted as the batch
   * says (a run in place recounts them from the files).
   */
  private async fromVersion1(batch: Batch, raw: any): Promise<BatchEntry> {
    const id = batch.id;
    const keys = batchKeys(id);
    const size = async (key: string) => (await stat(path.join(this.root, key)).catch(() => undefined))?.size;
    const inputKey = keys.input;
    const inputSize = await size(inputKey);
    const rc = batch.request_counts;
    const u = batch.usage;
    const counted = {
      completed: rc.completed,
      failed: rc.failed,
      usage: { promptTokens: u.input_tokens, cachedTokens: u.input_tokens_details.cached_tokens, completionTokens: u.output_tokens },
      cached: { lines: batch.cached_lines ?? 0, outputTokens: u.output_tokens_details.cached_tokens ?? 0 },
    };
    const open = !isFinal(batch.status);
    const parts = [];
    if (((await size(keys.output)) ?? 0) > 0) parts.push({ output: keys.output });
    if (((await size(keys.errors)) ?? 0) > 0) parts.push({ errors: keys.errors });
    const entry: BatchEntry = {
      batch,
      owner: raw.owner ?? null,
      seq: Number.isSafeInteger(raw.seq) ? raw.seq : 0,
      stopReason: batch.status === "cancelling" ? "cancelled" : null,
      inputKey: inputSize === undefined ? null : inputKey,
      counts: {
        completed: rc.completed,
        failed: rc.failed,
        inputTokens: u.input_tokens,
        cachedTokens: u.input_tokens_details.cached_tokens,
        outputTokens: u.output_tokens,
        cachedLines: batch.cached_lines ?? 0,
        cachedOutputTokens: u.output_tokens_details.cached_tokens ?? 0,
        spotSeconds: batch.engine_seconds?.spot ?? 0,
        dedicatedSeconds: batch.engine_seconds?.dedicated ?? 0,
      },
      shards:
        open && inputSize !== undefined
          ? [
              {
                idx: 0,
                model: batch.model ?? "",
                byteStart: 0,
                byteEnd: inputSize,
                total: rc.total,
                state: "queued",
                epoch: 0,
                checkpoints: 0,
                workerId: null,
                leaseUntil: null,
                parts,
                counted,
              },
            ]
          : [],
    };
    const retention = raw.output_expires_after;
    if (retention?.anchor === "created_at" && Number.isSafeInteger(retention.seconds)) entry.outputExpiresAfter = retention;
    return entry;
  }

  private async read<T>(file: string, take: (raw: any) => T | Promise<T>): Promise<T | undefined> {
    try {
      const raw = await readJsonFile(file);
      // A folder whose creation never completed has no record: it is not a batch.
      if (raw === undefined) return undefined;
      return await take(raw);
    } catch (err) {
      this.logger.warn({ err, file }, "skipping an unreadable state document");
      return undefined;
    }
  }

  /**
   * One write of a document at a time. A write that has not started yet reads the record when it starts, so a
   * request made meanwhile joins it (`join`) instead of queueing another; a write of a given version does not.
   */
  private write(key: string, join: boolean, run: () => Promise<void>): Promise<void> {
    const c = this.chains.get(key) ?? {};
    if (join && c.pending) return c.pending;
    const p: Promise<void> = (c.tail ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => {
        if (c.pending === p) c.pending = undefined;
        return run();
      });
    if (join) c.pending = p;
    c.tail = p;
    this.chains.set(key, c);
    const forget = () => {
      if (c.tail === p && !c.pending && this.chains.get(key) === c) this.chains.delete(key);
    };
    p.then(forget, forget);
    return p;
  }
}

/** A file's record; version 1 named the content's key `path` and kept no order. */
function fileEntry(id: string, raw: any): FileEntry {
  if (raw.version !== VERSION && raw.version !== 1) throw new Error(`unknown document version ${raw.version}`);
  const object = FileObjectSchema.parse(raw.version === 1 ? raw.file : raw.object);
  const key = raw.version === 1 ? raw.path : raw.key;
  if (object.id !== id || typeof key !== "string") throw new Error("not a file record");
  return { object, owner: raw.owner ?? null, key: key.split(path.sep).join("/"), seq: raw.version === 1 ? 0 : raw.seq };
}

/**
 * What a crash can leave in BATCH_DIR, removed before anything is served: temp files of atomic writes (*.tmp),
 * partial uploads, upload content whose record was never written, batch folders whose creation never reached
 * batch.json (no client was told of them), and file records whose content is gone. Only names this service
 * creates are looked at. Returns what was removed, relative to the root.
 */
export async function removeCrashLeftovers(root: string, state: MemoryState): Promise<string[]> {
  const removed: string[] = [];
  const remove = async (p: string) => {
    await rm(p, { recursive: true, force: true });
    removed.push(path.relative(root, p));
  };
  for (const e of await readdir(root, { withFileTypes: true })) {
    if (!e.isDirectory() || !BATCH_ID_RE.test(e.name)) continue;
    const dir = path.join(root, e.name);
    const names = await readdir(dir);
    // A batch.json that cannot be read is left for a person to look at; none at all means it never existed.
    if (!names.includes("batch.json")) await remove(dir);
    else for (const n of names) if (n.endsWith(".tmp")) await remove(path.join(dir, n));
  }
  for (const [id, f] of state.files) {
    if (
      await stat(path.join(root, f.key)).then(
        () => true,
        () => false,
      )
    )
      continue;
    state.files.delete(id);
    await remove(path.join(root, "files", `${id}.json`));
  }
  const filesDir = path.join(root, "files");
  for (const n of await readdir(filesDir)) {
    const content = /^(.+)\.jsonl$/.exec(n);
    if (n.endsWith(".tmp") || (content && FILE_ID_RE.test(content[1]) && !state.files.has(content[1])))
      await remove(path.join(filesDir, n));
  }
  const uploads = uploadDir(root);
  for (const n of await readdir(uploads).catch(() => [] as string[])) await remove(path.join(uploads, n));
  return removed;
}
