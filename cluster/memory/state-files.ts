// Makes the in-process state durable: each batch (with its shards and counts) and each file record is one JSON
// document under a folder, replaced atomically after every change that must survive the process, and read back
// when the state is opened. Writes of one document are chained, and a write waiting its turn takes the record as
// it is by then, so bursts of changes coalesce into few writes.
import { mkdir, readdir, rm } from "node:fs/promises";
import path from "node:path";
import type pino from "pino";
import { readJsonFile, writeJsonAtomic } from "../../api/stores/atomic-json.js";
import { BatchSchema, FileObjectSchema } from "../../api/schemas/objects.js";
import type { BatchEntry, FileEntry, MemoryState, StateStore } from "./state.js";

const VERSION = 1;

export class StateFiles implements StateStore {
  private readonly chains = new Map<string, { pending?: Promise<void>; tail?: Promise<void> }>();

  constructor(
    private readonly dir: string,
    private readonly logger: pino.Logger,
  ) {}

  private get batchesDir() {
    return path.join(this.dir, "batches");
  }

  private get filesDir() {
    return path.join(this.dir, "files");
  }

  async open(): Promise<void> {
    await mkdir(this.batchesDir, { recursive: true });
    await mkdir(this.filesDir, { recursive: true });
  }

  saveBatch(state: MemoryState, id: string): Promise<void> {
    const file = path.join(this.batchesDir, `${id}.json`);
    return this.write(`b:${id}`, async () => {
      const e = state.batches.get(id);
      if (e) await writeJsonAtomic(file, { version: VERSION, ...e });
      else await rm(file, { force: true });
    });
  }

  saveFile(state: MemoryState, id: string): Promise<void> {
    const file = path.join(this.filesDir, `${id}.json`);
    return this.write(`f:${id}`, async () => {
      const f = state.files.get(id);
      if (f) await writeJsonAtomic(file, { version: VERSION, ...f });
      else await rm(file, { force: true });
    });
  }

  /** Reads every document into `state` (the folder holds only these); unreadable ones are skipped with a warning. */
  async load(state: MemoryState): Promise<void> {
    let seq = 0;
    for (const name of await readdir(this.batchesDir)) {
      const id = name.replace(/\.json$/, "");
      if (!name.endsWith(".json")) continue;
      await this.read(path.join(this.batchesDir, name), (raw) => {
        const e = raw as BatchEntry;
        const batch = BatchSchema.parse(e.batch);
        if (batch.id !== id || !Array.isArray(e.shards) || typeof e.counts?.completed !== "number") throw new Error("not a batch record");
        state.batches.set(id, { ...e, batch });
        seq = Math.max(seq, e.seq);
      });
    }
    for (const name of await readdir(this.filesDir)) {
      const id = name.replace(/\.json$/, "");
      if (!name.endsWith(".json")) continue;
      await this.read(path.join(this.filesDir, name), (raw) => {
        const f = raw as FileEntry;
        const object = FileObjectSchema.parse(f.object);
        if (object.id !== id || typeof f.key !== "string") throw new Error("not a file record");
        state.files.set(id, { ...f, object });
        seq = Math.max(seq, f.seq);
      });
    }
    state.advanceSeq(seq);
  }

  /** Waits for every write under way. */
  async flush(): Promise<void> {
    await Promise.allSettled([...this.chains.values()].map((c) => c.tail));
  }

  private async read(file: string, take: (raw: unknown) => void): Promise<void> {
    try {
      const raw = (await readJsonFile(file)) as { version?: number } | undefined;
      if (raw?.version !== VERSION) throw new Error(`unknown document version ${raw?.version}`);
      const { version: _, ...rest } = raw;
      take(rest);
    } catch (err) {
      this.logger.warn({ err, file }, "skipping an unreadable state document");
    }
  }

  /**
   * One write of a document at a time. A write that has not started yet reads the record when it starts, so a
   * request made meanwhile joins it instead of queueing another.
   */
  private write(key: string, run: () => Promise<void>): Promise<void> {
    const c = this.chains.get(key) ?? {};
    if (c.pending) return c.pending;
    const p: Promise<void> = (c.tail ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => {
        if (c.pending === p) c.pending = undefined;
        return run();
      });
    c.pending = p;
    c.tail = p;
    this.chains.set(key, c);
    const forget = () => {
      if (c.tail === p && !c.pending && this.chains.get(key) === c) this.chains.delete(key);
    };
    p.then(forget, forget);
    return p;
  }
}
