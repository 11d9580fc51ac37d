// What the HTTP surface (api/) asks of the control plane (batches/, sync/, dataset-jobs/, uploads/), and the objects they pass: files, batches,
// pages, the queue and the pools. Routes depend only on these; app/service.ts wires the implementations.
import type { Readable } from "node:stream";
import type { BatchCommands } from "./batch-commands.js";
import type { BatchReads } from "./batch-reads.js";
import type { FileObject, Upload, UploadPart } from "./objects.js";
import type { Awaitable, ExpiresAfter, Owner, Page } from "./port-types.js";

export type { Awaitable, ExpiresAfter, Owner, Page } from "./port-types.js";

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
  /**
   * The file's content as a stream, with its size; undefined when there is no such file (or its content is gone).
   * `owner` undefined: whoever owns it (what an admin's read of another key's batch tallies; never a download).
   */
  open(id: string, owner: Owner | undefined): Promise<{ object: FileObject; size: number; content: Readable } | undefined>;
  list(q: { after?: string; limit: number; order: "asc" | "desc"; purpose?: string; owner: Owner }): Awaitable<Page<FileObject>>;
  delete(id: string, owner: Owner): Promise<boolean>;
}

export type { BatchCommands, CreateBatchInput, CreateInlineBatchInput } from "./batch-commands.js";
export type { BatchReads } from "./batch-reads.js";
export type { BatchInspection, BatchSearch, BatchViews, ListedBatch } from "./batch-views.js";

/** The batches as the Batch API's routes use them: its commands and its reads. */
export type BatchService = BatchCommands & BatchReads;

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
  /** Unix seconds when the last of those slots is back; null with none taken away. */
  preempted_until: number | null;
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
