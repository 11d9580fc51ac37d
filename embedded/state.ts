// The state behind the in-process implementations of the distributed mode's ports: what PostgreSQL's tables hold
// (batches with their shards, files, workers), in one process's memory. Every port reads and writes it through
// copies, so a caller holds a snapshot, as it would a row, never the live record.

import type { ModelCatalogue } from "../backends/registry.js";
import type { FileObject } from "../domain/objects.js";
import type { Owner, PoolStatus } from "../domain/ports.js";
import type { UsageRecord } from "../domain/usage.js";
import type { LiveCounts, ModelCounts } from "../state/batch-doc.js";
import type { OrderEntry } from "../state/output-order.js";
import type { BatchRow, ClusterEvent, ShardCounts, ShardPart } from "../state/ports.js";

export interface ShardRecord {
  idx: number;
  model: string;
  byteStart: number;
  byteEnd: number;
  total: number;
  state: "queued" | "running" | "done";
  epoch: number;
  checkpoints: number;
  workerId: string | null;
  /** ms since the epoch. */
  leaseUntil: number | null;
  parts: ShardPart[];
  counted: ShardCounts;
}

/** A batch's row, whose document's request_counts and usage are kept in `counts` (what checkpoints add to). */
export interface BatchEntry extends BatchRow {
  counts: LiveCounts;
  /** The same counts per model, for a batch whose shards name several (state/batch-doc.ts). */
  models?: ModelCounts[];
  shards: ShardRecord[];
  /** Its output order (state/output-order.ts), absent until first read. */
  outputOrder?: OrderEntry[];
}

export interface FileEntry {
  object: FileObject;
  owner: Owner;
  key: string;
  seq: number;
}

export interface WorkerEntry {
  id: string;
  pool: PoolStatus["name"];
  capacity: number;
  models: string[];
  running: string[];
  url: string | null;
  catalogue: ModelCatalogue | null;
  /** ms since the epoch. */
  lastSeen: number;
  preemptedUntil: number;
  preemptions: number;
}

/** Where the state is kept durably, if anywhere: told after each change that must survive the process. */
export interface StateStore {
  /** Writes the batch as the state has it, or as `next` has it (a change not yet applied; null: removed). */
  saveBatch(state: MemoryState, id: string, next?: BatchEntry | null): Promise<void>;
  /** Writes the file record as the state has it, or as `next` has it (a record not yet applied; null: removed). */
  saveFile(state: MemoryState, id: string, next?: FileEntry | null): Promise<void>;
  flush(): Promise<void>;
  /** Keeps a usage record that no batch holds (a deleted batch's, synchronous requests'), under its id. */
  saveUsage?(record: UsageRecord): Promise<void>;
}

/** How long a change that may be lost to a crash waits to be saved (with whatever follows it). */
const THROTTLE_MS = 500;

export class MemoryState {
  readonly batches = new Map<string, BatchEntry>();
  readonly files = new Map<string, FileEntry>();
  readonly workers = new Map<string, WorkerEntry>();
  private seq = 0;
  private readonly soon = new Map<string, NodeJS.Timeout>();
  /** The maintenance lock's holder. */
  leader: object | null = null;
  /**
   * The running totals (state/totals.ts). Kept in memory: after a restart they start from the batches the folder
   * still holds (the collector removes batches past their retention).
   */
  readonly totals = new Map<string, number>();
  /** The usage of deleted batches (the usage API reads the kept ones from them), by batch id. */
  readonly usageArchive = new Map<string, UsageRecord>();
  /** Start-time fair queuing between keys (tenancy/fair-share.ts): each owner's virtual time, and the clock. */
  readonly shares = { vtime: new Map<string, number>(), clock: 0 };
  /** Everything subscribed to the state's events (each node of the process). */
  readonly listeners = new Set<(e: ClusterEvent) => void>();

  /** `clock`: ms since the epoch (leases and liveness are measured by it). */
  constructor(
    readonly clock: () => number = Date.now,
    private readonly store?: StateStore,
  ) {}

  addTotals(adds: Array<[string, number]>): void {
    for (const [name, n] of adds) this.totals.set(name, (this.totals.get(name) ?? 0) + n);
  }

  nextSeq(): number {
    return ++this.seq;
  }

  advanceSeq(to: number): void {
    this.seq = Math.max(this.seq, to);
  }

  /** Resolves once the batch as it is now (or its absence) is durable. */
  savedBatch(...ids: string[]): Promise<unknown> {
    return this.store ? Promise.all([...new Set(ids)].map((id) => this.store!.saveBatch(this, id))) : Promise.resolve();
  }

  /** Keeps `next` as the batch's record, or its removal (resolves once written); the caller then applies it. */
  keepBatch(id: string, next: BatchEntry | null): Promise<void> {
    return this.store ? this.store.saveBatch(this, id, next) : Promise.resolve();
  }

  /** Saves the batch soon (within THROTTLE_MS), not now: for changes that may be lost to a crash. */
  saveSoon(...ids: string[]): void {
    for (const id of ids) {
      if (!this.store || this.soon.has(id)) continue;
      const timer = setTimeout(() => {
        this.soon.delete(id);
        this.savedBatch(id).catch(() => undefined);
      }, THROTTLE_MS);
      timer.unref();
      this.soon.set(id, timer);
    }
  }

  /** Keeps a usage record no batch holds, durably where the state is kept (replacing one of its id). */
  async archiveUsage(record: UsageRecord): Promise<void> {
    await this.store?.saveUsage?.(record);
    this.usageArchive.set(record.batchId, record);
  }

  savedFile(id: string): Promise<unknown> {
    return this.store ? this.store.saveFile(this, id) : Promise.resolve();
  }

  /** Keeps `next` as the file's record, or its removal (resolves once written); the caller then applies it. */
  keepFile(id: string, next: FileEntry | null): Promise<void> {
    return this.store ? this.store.saveFile(this, id, next) : Promise.resolve();
  }

  /** Writes what is scheduled and waits for every write under way (before the process lets go of the state). */
  async flush(): Promise<void> {
    const soon = [...this.soon.keys()];
    for (const t of this.soon.values()) clearTimeout(t);
    this.soon.clear();
    await this.savedBatch(...soon).catch(() => undefined);
    await this.store?.flush();
  }

  /** Puts running shards that `lapsed` says lost their lease back in the queue under a new epoch; returns their batches. */
  requeue(lapsed: (s: ShardRecord) => boolean): string[] {
    const batches: string[] = [];
    for (const e of this.batches.values())
      for (const s of e.shards)
        if (s.state === "running" && lapsed(s)) {
          Object.assign(s, { state: "queued", workerId: null, leaseUntil: null, epoch: s.epoch + 1 });
          batches.push(e.batch.id);
        }
    return batches;
  }

  /** Workers heard from within `withinSeconds`. */
  /** Running shards by the worker running them, over `batches` (every batch by default). */
  runningByWorker(batches: Iterable<BatchEntry> = this.batches.values()): Map<string, number> {
    const n = new Map<string, number>();
    for (const e of batches)
      for (const s of e.shards) if (s.state === "running" && s.workerId) n.set(s.workerId, (n.get(s.workerId) ?? 0) + 1);
    return n;
  }

  liveWorkers(withinSeconds: number): WorkerEntry[] {
    const since = this.clock() - withinSeconds * 1000;
    return [...this.workers.values()].filter((w) => w.lastSeen > since).sort((a, b) => (a.id < b.id ? -1 : 1));
  }
}
