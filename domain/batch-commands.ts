// The batch commands the routes give the control plane: create (from a file, or inline lines), cancel, retry,
// delete. Reads are in batch-reads.ts, the console's views in batch-views.ts.
import type { BatchPlan } from "./batch-plan.js";
import type { Batch, BatchEndpoint } from "./objects.js";
import type { ExpiresAfter, Owner } from "./port-types.js";
import type { RetryFilter } from "./retry.js";

export interface CreateBatchInput {
  input_file_id: string;
  endpoint: BatchEndpoint;
  completion_window: string;
  metadata?: Record<string, string> | null;
  /** Retention of the output and error files. */
  output_expires_after?: ExpiresAfter;
  /** Parameters for every line whose body does not set them (domain/default-params.ts). */
  default_params?: Record<string, unknown>;
  owner: Owner;
}

/** The inline form, already validated by the route. */
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

export interface BatchCommands {
  create(input: CreateBatchInput): Promise<Batch>;
  createInline(input: CreateInlineBatchInput): Promise<Batch>;
  /** What a create of these fields would ask and cost, refused as the create would be; nothing is queued or run. */
  plan(input: CreateBatchInput): Promise<BatchPlan>;
  cancel(id: string, owner: Owner): Promise<Batch>;
  /**
   * Pauses a batch that has not ended (it claims nothing; what runs checkpoints and goes back to the queue), or
   * resumes one where it stopped. `owner` undefined: an admin, over every key's batches.
   */
  pause(id: string, owner: Owner | undefined): Promise<Batch>;
  resume(id: string, owner: Owner | undefined): Promise<Batch>;
  /** Pauses or resumes every batch not ended of `owner` (undefined: every key's), and of `model` if given. */
  pauseMany(action: "pause" | "resume", q: { owner: Owner | undefined; model?: string }): Promise<Batch[]>;
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
}
