// The state behind the in-process implementations of the distributed mode's ports: what PostgreSQL's tables hold
// (batches with their shards, files, workers), in one process's memory. Every port reads and writes it through
// copies, so a caller holds a snapshot, as it would a row, never the live record.
import type { ExpiresAfter, Owner, PoolStatus } from "../../api/contracts.js";
import type { Batch, FileObject } from "../../api/schemas/objects.js";
import type { ClusterEvent, ShardPart, StopReason } from "../ports.js";

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
}

export interface BatchEntry {
  /** The document; its request_counts and usage are kept in `counts` (what checkpoints add to). */
  batch: Batch;
  owner: Owner;
  seq: number;
  stopReason: StopReason | null;
  inputKey: string | null;
  outputExpiresAfter?: ExpiresAfter;
  counts: { completed: number; failed: number; inputTokens: number; cachedTokens: number; outputTokens: number };
  shards: ShardRecord[];
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
  /** ms since the epoch. */
  lastSeen: number;
  preemptedUntil: number;
  preemptions: number;
}

export class MemoryState {
  readonly batches = new Map<string, BatchEntry>();
  readonly files = new Map<string, FileEntry>();
  readonly workers = new Map<string, WorkerEntry>();
  private seq = 0;
  /** The maintenance lock's holder. */
  leader: object | null = null;
  /** Everything subscribed to the state's events (each node of the process). */
  readonly listeners = new Set<(e: ClusterEvent) => void>();

  /** `clock`: ms since the epoch (leases and liveness are measured by it). */
  constructor(readonly clock: () => number = Date.now) {}

  nextSeq(): number {
    return ++this.seq;
  }

  /** Workers heard from within `withinSeconds`. */
  liveWorkers(withinSeconds: number): WorkerEntry[] {
    const since = this.clock() - withinSeconds * 1000;
    return [...this.workers.values()].filter((w) => w.lastSeen > since).sort((a, b) => (a.id < b.id ? -1 : 1));
  }
}
