// What the HTTP surface (api/) asks of the control plane (cluster/), and the objects they pass: files, batches,
// pages, the queue and the pools. Routes depend only on these; app/service.ts wires the implementations.
import type { Readable } from "node:stream";
import type { Batch, BatchEndpoint, FileObject, Upload, UploadPart } from "./objects.js";
import type { RetryFilter } from "./retry.js";

/** Who owns an object: a stable hash of the API key, or null when auth is off. Never the key itself. */
export type Owner = string | null;

/** Routes await what a store answers (PostgreSQL's later, one process's at once). */
export type Awaitable<T> = T | Promise<T>;

export interface Page<T> {
  data: T[];
  has_more: boolean;
}

export interface FileRecord {
  object: FileObject;
  owner: Owner;
}

export interface NewFile {
  filename: string;
  purpose: FileObject["purpose"];
  owner: Owner;
  /** Retention; without it the store's default expiry applies. */
  expiresAfter?: ExpiresAfter;
}

/** The Files API as the routes see it. */
export interface FileStore {
  /** Moves an uploaded temp file into the store and records it durably. */
  adopt(input: NewFile & { tmpPath: string }): Promise<FileObject>;
  get(id: string, owner: Owner): Awaitable<FileRecord | undefined>;
  /** The file's content as a stream, with its size; undefined when there is no such file (or its content is gone). */
  open(id: string, owner: Owner): Promise<{ object: FileObject; size: number; content: Readable } | undefined>;
  list(q: { after?: string; limit: number; order: "asc" | "desc"; purpose?: string; owner: Owner }): Awaitable<Page<FileObject>>;
  delete(id: string, owner: Owner): Promise<boolean>;
}

/** OpenAI's retention setting: expire `seconds` after the file's created_at. */
export interface ExpiresAfter {
  anchor: "created_at";
  seconds: number;
}

export interface CreateBatchInput {
  input_file_id: string;
  endpoint: BatchEndpoint;
  completion_window: string;
  metadata?: Record<string, string> | null;
  /** Retention of the output and error files. */
  output_expires_after?: ExpiresAfter;
  owner: Owner;
}

/** The proof of concept's inline form, already validated by the route. */
export interface CreateInlineBatchInput {
  endpoint: BatchEndpoint;
  completion_window: string;
  metadata?: Record<string, string> | null;
  output_expires_after?: ExpiresAfter;
  /** Full OpenAI batch lines built from the inline items. */
  lines: Array<{ custom_id: string; method: "POST"; url: BatchEndpoint; body: Record<string, unknown> }>;
  owner: Owner;
  /** The lines may name several models, each run on its own (Anthropic's rule); default one model (OpenAI's). */
  mixedModels?: boolean;
}

export interface BatchService {
  create(input: CreateBatchInput): Promise<Batch>;
  createInline(input: CreateInlineBatchInput): Promise<Batch>;
  get(id: string, owner: Owner): Awaitable<Batch | undefined>;
  list(q: { after?: string; limit: number; owner: Owner }): Awaitable<Page<Batch>>;
  cancel(id: string, owner: Owner): Promise<Batch>;
  /**
   * A new batch of the finished batch's failed lines (and those a cancel or an expiry left unrun), as `filter`
   * picks them, with `metadata.retry_of`; lines that succeeded are never rerun.
   */
  retry(id: string, owner: Owner, filter: RetryFilter): Promise<Batch>;
  /**
   * Deletes a finished batch with its result files and everything stored for it (Anthropic's Message Batches
   * delete); a batch still running is refused (`batch_not_finished`).
   */
  delete(id: string, owner: Owner): Promise<void>;
  /** The console's view of a batch; undefined when there is none for this owner. */
  inspect(id: string, owner: Owner): Promise<BatchInspection | undefined>;
  /** Newest first, as list, filtered; scans a bounded number of batches per page. */
  search(q: BatchSearch): Promise<Page<ListedBatch>>;
  /**
   * The batch's result lines so far (the proof of concept's /results route), whole lines only: a line being
   * written is left for the next read. Undefined when no result exists yet.
   */
  results(id: string, owner: Owner): Awaitable<AsyncIterable<string> | undefined>;
}

/** What the console shows of one batch beyond the Batch object. */
export interface BatchInspection {
  batch: Batch;
  /** The input file's name while the file is there. */
  input_filename: string | null;
  /** Its shards and who ran them (one on one machine, the simulated pool's slot). */
  shards: Array<{ idx: number; state: string; worker: string | null; completed: number; failed: number; total: number }>;
  /** Its webhook event's delivery, where webhooks are on. */
  webhook: {
    event_id: string;
    type: string;
    url: string;
    attempts: number;
    delivered_at: number | null;
    gave_up: boolean;
    next_at: number;
    last_status: number | null;
    last_error: string | null;
  } | null;
  /** Up to 100 failed lines: the file's validation errors (with their line numbers), else the error file's first lines. */
  /** The first failed lines, each with its 1-based input line where known; `not_run`: the batch ended first. */
  line_errors: Array<{ line: number | null; custom_id: string | null; code: string; message: string; not_run: boolean }>;
  /** All its error lines: failed while running or at validation, against left unrun by a cancel or an expiry. */
  line_error_counts: { failed: number; not_run: number };
}

/** A console search: any of status, model and text (in the id, the input file's name or the metadata). */
export interface BatchSearch {
  status?: string;
  model?: string;
  /** Only batches for this endpoint (Anthropic's list shows its /v1/messages batches). */
  endpoint?: string;
  text?: string;
  after?: string;
  limit: number;
  owner: Owner;
}

export type ListedBatch = Batch & { input_filename: string | null };

/** OpenAI's Uploads API: a file sent in parts (each streamed to the blob store), completed into a File. */
export interface UploadStore {
  create(input: {
    filename: string;
    purpose: string;
    bytes: number;
    mime_type: string;
    owner: Owner;
    /** The retention of the file it completes into. */
    expiresAfter?: ExpiresAfter;
  }): Promise<Upload>;
  /** Stores a part from a local temp file (moved, not copied, where it can be). */
  addPart(id: string, owner: Owner, tmpPath: string): Promise<UploadPart>;
  complete(id: string, owner: Owner, input: { part_ids: string[]; md5?: string }): Promise<Upload>;
  cancel(id: string, owner: Owner): Promise<Upload>;
}

export interface QueueStats {
  depth: number;
  max_depth: number;
  running: number;
}

export interface PoolStatus {
  name: "spot" | "dedicated";
  capacity: number;
  in_use: number;
  available: number;
  /** Slots taken away by a simulated preemption, back after the cooldown; preemptions since start. */
  preempted: number;
  preemptions: number;
  jobs: string[];
  /** The distributed mode's registered workers of this pool. */
  workers?: Array<{ id: string; capacity: number; in_use: number; last_seen: number; preempted: boolean }>;
}

export interface ControlPlaneStatus {
  queueStats(): Awaitable<QueueStats>;
  poolStatus(): Awaitable<PoolStatus[]>;
  /**
   * Simulates losing the spot capacity: its running batches checkpoint (what finished stays, nothing runs twice)
   * and go back to the queue first in line, to resume on dedicated capacity or on spot once it is back.
   */
  preemptSpot(): Awaitable<{ preempted: string[]; cooldown_seconds: number }>;
}
