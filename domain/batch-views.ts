// The console's views of batches (and Anthropic's filtered list): one batch inspected, a search over them.
import type { Batch } from "./objects.js";
import type { Owner, Page } from "./port-types.js";

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
  /** The first failed lines, each with its 1-based input line where known; `not_run`: the batch ended first. */
  line_errors: Array<{ line: number | null; custom_id: string | null; code: string; message: string; not_run: boolean }>;
  /** All its error lines: failed while running, against left unrun by a cancel, an expiry or a stop. */
  line_error_counts: { failed: number; not_run: number };
  /** Whose it is: its API key's id (null: the open API), where keys are configured. */
  api_key_id?: string | null;
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
  /** undefined: every owner's (an admin key's view). */
  owner: Owner | undefined;
}

/** `api_key_id`: whose it is (its API key's id; null: the open API). */
export type ListedBatch = Batch & { input_filename: string | null; api_key_id?: string | null };

export interface BatchViews {
  /** The console's view of a batch; undefined when there is none for this owner. */
  inspect(id: string, owner: Owner | undefined): Promise<BatchInspection | undefined>;
  /** Newest first, as list, filtered; one query of the batch records per page. */
  search(q: BatchSearch): Promise<Page<ListedBatch>>;
}
