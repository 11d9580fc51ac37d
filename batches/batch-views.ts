// The console's views of batches, apart from the commands (batches/batch-service.ts): one batch inspected (its
// shards, webhook and failed lines) and a search (status, model, endpoint, text and key=value metadata), which
// Anthropic's list reads too.
import type { ModelRegistry } from "../backends/registry.js";
import type { BatchInspection, BatchSearch, BatchViews, ListedBatch } from "../domain/batch-views.js";
import type { Batch } from "../domain/objects.js";
import type { Owner, Page } from "../domain/ports.js";
import type { BatchRecords, FileRecords, WorkQueue } from "../state/ports.js";
import type { BlobStore } from "../stores/blob-store.js";
import { blobLines } from "./blob-lines.js";
import { clientView } from "./client-view.js";
import { type LineErrors, lineErrors } from "./line-errors.js";

export interface ClusterBatchViewsDeps {
  batches: BatchRecords;
  queue: WorkQueue;
  files: FileRecords;
  blobs: BlobStore;
  registry: ModelRegistry;
  now: () => number;
  /** What the console calls an owner: its API key's id (null: the open API). */
  keyIdOf?: (owner: Owner) => string | null;
}

export class ClusterBatchViews implements BatchViews {
  constructor(private readonly deps: ClusterBatchViewsDeps) {}

  private view(batch: Batch): Batch {
    return clientView(batch, this.deps.registry, this.deps.now());
  }

  async inspect(id: string, scope: Owner | undefined): Promise<BatchInspection | undefined> {
    const row = await this.deps.batches.get(id, scope);
    if (!row) return undefined;
    // Its files are its owner's (an admin may be looking).
    const { owner } = row;
    const { batch } = row;
    const shards = await this.deps.queue.ofBatch(id);
    const w = row.webhook;
    return {
      batch: this.view(batch),
      input_filename: (await this.deps.files.get(batch.input_file_id, owner))?.object.filename ?? null,
      shards: shards.map((s) => ({
        idx: s.idx,
        state: s.state,
        worker: s.workerId,
        completed: s.completed,
        failed: s.failed,
        total: s.total,
      })),
      webhook: w
        ? {
            event_id: w.event_id,
            type: w.type,
            url: w.url,
            attempts: w.attempts,
            delivered_at: w.delivered_at,
            gave_up: w.gave_up,
            next_at: w.next_at,
            last_status: w.last_status,
            last_error: w.last_error,
          }
        : null,
      ...(await this.lineErrors(batch, owner)),
      ...(this.deps.keyIdOf ? { api_key_id: this.deps.keyIdOf(owner) } : {}),
    };
  }

  private async lineErrors(batch: Batch, owner: Owner): Promise<LineErrors> {
    const file = async (id: string | null | undefined) => (id ? await this.deps.files.keyOf(id, owner) : undefined);
    const [errors, input] = await Promise.all([file(batch.error_file_id), file(batch.input_file_id)]);
    return lineErrors(batch, {
      errorLines: () => blobLines(this.deps.blobs, errors ? [errors.key] : []),
      inputLines: () => blobLines(this.deps.blobs, input ? [input.key] : []),
    });
  }

  async search(q: BatchSearch): Promise<Page<ListedBatch>> {
    const page = await this.deps.batches.search(q);
    // Whose each batch is: an admin's list spans keys, or is one key's by its filter.
    const key = (owner: Owner) => (this.deps.keyIdOf ? { api_key_id: this.deps.keyIdOf(owner) } : {});
    return {
      data: page.data.map((r) => ({ ...this.view(r.batch), input_filename: r.inputFilename, ...key(r.owner) })),
      has_more: page.has_more,
    };
  }
}
