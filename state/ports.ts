// The control plane's state ports: what its batch service, workers, shard runs, maintenance and finalizing ask of
// the state, saying nothing of where it lives. embedded/ implements them in one process's memory (kept in
// BATCH_DIR's files when it runs alone), postgres/ on PostgreSQL for many processes; file contents go through the
// BlobStore port (stores/blob-store.ts) to a folder or S3.

import type { ModelCatalogue } from "../backends/registry.js";
import type { BatchFilter } from "../domain/batch-search.js";
import type { Batch, BatchStatus, FileObject } from "../domain/objects.js";
import type { ExpiresAfter, FileStore, NewFile, Owner, Page, PoolStatus } from "../domain/ports.js";
import type { UsageRecord } from "../domain/usage.js";
import type { ShardPlan } from "../pipeline/shards.js";
import type { CachedWork, TokenUsage } from "../pipeline/types.js";
import type { SlaSnapshot } from "./sla.js";
import type { Totals } from "./totals.js";

export const OPEN_STATUSES: readonly BatchStatus[] = ["validating", "in_progress", "finalizing", "cancelling"];

/** Decided once, by a cancel, the deadline or a shard that cannot run: the batch's shards stop and it ends so. */
export type StopReason = "cancelled" | "expired" | "failed";

export interface BatchRow {
  batch: Batch;
  owner: Owner;
  seq: number;
  stopReason: StopReason | null;
  inputKey: string | null;
  outputExpiresAfter?: ExpiresAfter;
  /** The batch's webhook event, set with its final status where webhooks are on (the outbox, one per batch). */
  webhook?: WebhookState | null;
  /** Its estimated tokens by model (pipeline/token-estimate.ts): what its key has enqueued while it is open. */
  enqueued?: Record<string, number> | null;
}

/** A batch's webhook event and its delivery so far. */
export interface WebhookState {
  /** `evt_…`: the same on every attempt, so a receiver can deduplicate. */
  event_id: string;
  type: "batch.completed" | "batch.failed" | "batch.expired" | "batch.cancelled";
  created_at: number;
  /** Where it goes (the deployment's URL, or the API key's). */
  url: string;
  attempts: number;
  /** Unix seconds of the next attempt. */
  next_at: number;
  delivered_at: number | null;
  /** Retried past WEBHOOK_RETRY_SECONDS without a 2xx. */
  gave_up: boolean;
  last_status: number | null;
  last_error: string | null;
}

export interface NewBatchRecord {
  batch: Batch;
  owner: Owner;
  inputKey: string | null;
  outputExpiresAfter?: ExpiresAfter;
  shards: ShardPlan[];
  /** A batch recorded already ended (its file failed validation) carries its webhook event from the start. */
  webhook?: WebhookState | null;
  /** Admit a batch only while the queue (MAX_QUEUE_DEPTH places) has room for its key (fair-share.ts's queueRoom). */
  maxQueued?: number;
  /** Its estimated tokens by model, held against its key's limits while it is open. */
  enqueued?: Record<string, number>;
  /**
   * The key's enqueued-token limit on each of those models that has one: the batch is admitted only while its
   * owner's open batches and it stay within each, decided atomically with the insert (else TokenLimitReached).
   */
  tokenLimits?: Record<string, number>;
}

/** A batch that would take its key's enqueued tokens for a model past the key's limit: nothing was recorded. */
export class TokenLimitReached extends Error {
  constructor(
    readonly model: string,
    readonly limit: number,
    /** Already enqueued by the key's open batches. */
    readonly enqueued: number,
    /** This batch's estimate. */
    readonly requested: number,
  ) {
    super(`enqueued token limit reached for ${model}`);
    this.name = "TokenLimitReached";
  }
}

/** A key's enqueued tokens on one model now: its open batches' estimates. */
export interface EnqueuedTokens {
  owner: Owner;
  model: string;
  tokens: number;
}

/** Batches and their shards, with live counts; a status changes only from the status its writer read. */
export interface BatchRecords {
  /** Records a batch with its shards; false (nothing recorded) when the queue has no room for its key (`maxQueued`). */
  insert(a: NewBatchRecord): Promise<boolean>;
  get(id: string, owner?: Owner): Promise<BatchRow | undefined>;
  /** `owner` undefined: every owner's. */
  list(q: { after?: string; limit: number; owner: Owner | undefined }): Promise<Page<Batch>>;
  /**
   * Newest first as list, only the batches `q` matches (domain/batch-search.ts, applied where the batches are kept:
   * one query a page), each with its input file's name while the file is there.
   */
  search(
    q: BatchFilter & { after?: string; limit: number; owner: Owner | undefined },
  ): Promise<Page<{ batch: Batch; inputFilename: string | null; owner: Owner }>>;
  /** Batches queued: accepted, not yet started on any worker, not stopped (what MAX_QUEUE_DEPTH bounds). */
  queuedCount(): Promise<number>;
  /** The batches queued of each key that has any, by fair-share.ts's shareKey. */
  queuedByOwner(): Promise<Map<string, number>>;
  /**
   * Changes a batch atomically while its status is one of `from`: `change` edits the row read (the batch, the
   * stop reason), or returns false to leave it; undefined when the status was another or the batch is gone.
   */
  update(id: string, from: readonly BatchStatus[], change: (row: BatchRow) => unknown): Promise<BatchRow | undefined>;
  /** Stops open batches past their deadline (as expired); returns their ids. */
  expireDue(now: number): Promise<string[]>;
  /** Open batches none of whose shards is still to run. */
  readyToFinish(limit?: number): Promise<string[]>;
  /** completed + failed == total: requests without a counted result are failed. */
  settleCounts(id: string): Promise<void>;
  endedBefore(before: number, limit?: number): Promise<string[]>;
  /** Batches whose webhook is due (neither delivered nor given up, next attempt at or before `now`). */
  webhooksDue(now: number, limit: number): Promise<Array<{ id: string; owner: Owner; webhook: WebhookState }>>;
  /** Records a delivery attempt's outcome. */
  setWebhook(id: string, webhook: WebhookState): Promise<void>;
  /** Deletes a batch; returns its input's key when nothing else needs it. */
  remove(id: string): Promise<{ orphanInput?: string }>;
  /** The running totals (state/totals.ts), added to as batches end. */
  totals(): Promise<Totals>;
  /** Each key's enqueued tokens by model (open batches only: a batch that ends releases its own). */
  enqueued(): Promise<EnqueuedTokens[]>;
  /**
   * The usage of batches that ended in [start, end) (unix seconds), kept for every batch once it ends: a batch
   * deleted or expired away leaves its record behind.
   */
  usage(q: { start: number; end: number }): Promise<UsageRecord[]>;
  /** Keeps a usage record that is no batch's (synchronous requests'), replacing the one kept under its id. */
  keepUsage(record: UsageRecord): Promise<void>;
}

/** [shard index, how many of that shard's output lines the batch has through this entry]. */
export type OrderEntry = [number, number];

export interface OutputOrder {
  entries: OrderEntry[];
  /** Each shard's committed output objects in order, by shard index. */
  keys: Map<number, string[]>;
}

export interface ShardPart {
  output?: string;
  errors?: string;
}

/** What a shard's commits have added to its batch so far. */
export interface ShardCounts {
  completed: number;
  failed: number;
  usage: TokenUsage;
  /** Of the completed, those answered without running (absent: none). */
  cached?: CachedWork;
}

export interface ClaimedShard {
  batchId: string;
  idx: number;
  model: string;
  endpoint: string;
  inputKey: string;
  byteStart: number;
  byteEnd: number;
  total: number;
  epoch: number;
  checkpoints: number;
  parts: ShardPart[];
  counted: ShardCounts;
  stopReason: StopReason | null;
  deadlineAt: number;
  /** Near its deadline when claimed (urgent work prefers dedicated workers). */
  urgent: boolean;
  /** The pool of the worker that claimed it (null: outside the pools); its engine time is counted there. */
  pool: PoolStatus["name"] | null;
}

export interface ShardCommit {
  part: ShardPart;
  completed: number;
  failed: number;
  usage: TokenUsage;
  /** Of the completed, those answered without running (absent: none). */
  cached?: CachedWork;
  /** Seconds the shard held its slot since the last commit: the batch's engine time in the claim's pool. */
  seconds?: number;
  /**
   * Counts only, that the committer can recount from its own files after a crash (a run in place): they need
   * not be durable before the commit returns. Absent: durable on return.
   */
  recountable?: boolean;
}

export type CommitResult = "committed" | "fenced";

export interface ClaimOptions {
  workerId: string;
  /** null: a worker outside the pools, which takes its models' shards whatever the pool rules say. */
  pool: PoolStatus["name"] | null;
  models: string[];
  limit: number;
  leaseSeconds: number;
  urgentSeconds: number;
  /** Unix seconds. */
  now: number;
  /**
   * Whether shards whose lease lapsed may be taken (default true). A worker that was itself cut off from the state
   * says false for a lease after it is back: the others were likely cut off too, and renew theirs meanwhile.
   */
  takeLapsed?: boolean;
  /**
   * The shards this worker runs now: never claimed again by it, whatever their lease says. Its heartbeat came late
   * (a loaded machine), not its run ended; the heartbeat renews them, and a second run of the same lines is waste.
   */
  holding?: ReadonlyArray<Pick<ClaimedShard, "batchId" | "idx">>;
  /** The keys' share weights by owner (tenancy/fair-share.ts; "" for no owner); 1 where absent. */
  weights?: Readonly<Record<string, number>>;
}

/**
 * The work queue: shards claimed under a lease renewed by heartbeat; every claim raises the shard's epoch, and
 * a worker's commits count only under the epoch it claimed.
 */
export interface WorkQueue {
  claim(o: ClaimOptions): Promise<ClaimedShard[]>;
  /** Unfinished shards of stopped batches that no worker holds (to write their error lines). */
  claimStopped(workerId: string, leaseSeconds: number, limit: number): Promise<ClaimedShard[]>;
  /**
   * Unfinished shards of `models` (none of which a live worker serves any more) in batches that run (not stopped,
   * not paused) and that no worker holds: to write their lines' errors, so the batch ends.
   */
  claimUnserved(workerId: string, models: readonly string[], leaseSeconds: number, limit: number): Promise<ClaimedShard[]>;
  /** Renews leases; returns the shards no longer held, the stop reasons of their batches, and those paused. */
  heartbeat(workerId: string, shards: Array<Pick<ClaimedShard, "batchId" | "idx" | "epoch">>, leaseSeconds: number): Promise<Heartbeat>;
  /** Records a checkpoint's part and adds its counts to the batch, once, under the claimed epoch. */
  commit(s: ClaimedShard, c: ShardCommit, leaseSeconds: number): Promise<CommitResult>;
  finish(s: ClaimedShard): Promise<CommitResult>;
  handBack(s: ClaimedShard): Promise<void>;
  /**
   * Puts shards whose lease lapsed (on the state's own clock) back in the queue, fencing their old workers;
   * returns how many. None while the state itself came back less than `graceSeconds` ago: its outage kept every
   * worker from renewing, and they get that long to do so.
   */
  reap(graceSeconds: number): Promise<number>;
  /** Open batches' queued and running shards and their progress (state/sla.ts; the workers are the registry's). */
  slaSnapshot(): Promise<Omit<SlaSnapshot, "workers">>;
  ofBatch(batchId: string): Promise<ShardView[]>;
  /**
   * The batch's output order (state/output-order.ts), first extended by what its shards committed since and
   * kept, with each shard's output objects; undefined when the batch is gone.
   */
  outputOrder(batchId: string): Promise<OutputOrder | undefined>;
}

export interface ShardView {
  idx: number;
  /** queued | running | done */
  state: string;
  parts: ShardPart[];
  total: number;
  /** Who runs it (or ran it last). */
  workerId: string | null;
  completed: number;
  failed: number;
}

export const shardKey = (s: Pick<ClaimedShard, "batchId" | "idx">) => `${s.batchId}/${s.idx}`;

/** The Files API plus what the distributed mode's housekeeping and finalizing need. */
export interface FileRecords extends FileStore {
  /** Records content already stored under `key`, under the caller's id (recording twice keeps one file). */
  record(input: NewFile & { id: string; key: string; size: number }): Promise<FileObject>;
  keyOf(id: string, owner: Owner): Promise<{ object: FileObject; key: string } | undefined>;
  expired(now: number, limit?: number): Promise<Array<{ id: string; key: string; purpose: string }>>;
  remove(id: string): Promise<void>;
}

export interface WorkerInfo {
  id: string;
  pool: PoolStatus["name"];
  capacity: number;
  /** Shards it runs now. */
  inUse: number;
  /** Batch ids it runs. */
  running: string[];
  /** The models it serves. */
  models: string[];
  /** Unix seconds of its last heartbeat. */
  lastSeen: number;
  preempted: boolean;
  /** Unix seconds when its slots are back, while it is preempted (else null). */
  preemptedUntil: number | null;
  preemptions: number;
  /** Where API servers send it synchronous requests for its models (null: it takes none). */
  url: string | null;
  /** Its models as API servers name batches by them (null: a worker of an earlier release, which says only names). */
  catalogue: ModelCatalogue | null;
}

/** The live workers: the pools the scheduler and /pools see. */
export interface WorkerRegistry {
  register(w: {
    id: string;
    pool: PoolStatus["name"];
    capacity: number;
    models: string[];
    running: string[];
    url?: string | null;
    catalogue?: ModelCatalogue;
  }): Promise<void>;
  preempted(id: string, cooldownSeconds: number): Promise<void>;
  unregister(id: string): Promise<void>;
  /** Workers heard from within `withinSeconds`. */
  live(withinSeconds: number): Promise<WorkerInfo[]>;
  /** Removes the rows of workers not heard from for `olderThanSeconds` (killed, never unregistered); how many. */
  forget(olderThanSeconds: number): Promise<number>;
  /** Batches queued (as `BatchRecords.queuedCount` counts them), and shards running. */
  queueCounts(): Promise<{ depth: number; running: number }>;
}

export interface Heartbeat {
  lost: Set<string>;
  stops: Map<string, StopReason>;
  /** Batches paused: a pause event this worker missed. */
  paused: Set<string>;
}

export type ClusterEvent =
  | { type: "stop"; batch_id: string; reason: StopReason }
  | { type: "work" }
  /** The batch was paused: its shards' workers checkpoint them and hand them back (nothing is claimed until resume). */
  | { type: "pause"; batch_id: string }
  /** A shard finished: its batch may be ready to finalize (the maintenance process acts at once, not at its next tick). */
  | { type: "shard_done"; batch_id: string }
  | { type: "preempt"; pool: "spot"; cooldown_seconds: number }
  /** The shard's worker checkpoints it and hands it back: a more urgent batch waits for its slot (state/sla.ts). */
  | { type: "yield"; batch_id: string; idx: number; for_batch: string };

/** Cross-process signals; delivery is best effort (each has a slower fallback). */
export interface EventBus {
  publish(event: ClusterEvent): Promise<void>;
}

/**
 * At most one holder among all processes. With many processes it is a lease: a holder that stops renewing it
 * (frozen, cut off, dead) loses it when it lapses, and another takes it over.
 */
/** A write of a leader whose lease lapsed or was taken over: refused, for the new holder decides now. */
export class LeaderLost extends Error {
  constructor(name: string) {
    super(`this process no longer holds the ${name} lease`);
    this.name = "LeaderLost";
  }
}

export interface LeaderLock {
  /** Takes the lock if it is free (true), or renews it and says whether this process still holds it. */
  hold(): Promise<boolean>;
  readonly held: boolean;
  release(): Promise<void>;
}

/** The maintenance's lock, and the ports it writes through: every write is refused once the lock is lost. */
export interface LeaderPorts {
  lock: LeaderLock;
  batches: BatchRecords;
  queue: WorkQueue;
  files: FileRecords;
}

/** One set of the ports, as a composition opens them (PostgreSQL's for many processes, or one process's memory). */
export interface ClusterPorts {
  batches: BatchRecords;
  queue: WorkQueue;
  files: FileRecords;
  workers: WorkerRegistry;
  events: EventBus;
  /** Delivers every process's events, this one's included, until closed. */
  subscribe(onEvent: (e: ClusterEvent) => void): { close(): Promise<void> };
  /** The maintenance's lock (one holder among everything sharing the state, `holder` naming this one) and its ports. */
  maintenance(holder: string, leaseSeconds: number): LeaderPorts;
  /** Resolves when the state answers now (readiness); throws the domain's database_unavailable when it does not. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
