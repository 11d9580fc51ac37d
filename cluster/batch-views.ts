// The console's views of batches, apart from the commands (cluster/batch-service.ts): one batch inspected (its
// shards, webhook and failed lines) and a search (status, model, endpoint, text and key=value metadata), which
// Anthropic's list reads too.
import type { ModelRegistry } from "../backends/registry.js";
import type { BatchInspection, BatchSearch, BatchViews, ListedBatch } from "../domain/batch-views.js";
import type { Batch } from "../domain/objects.js";
import type { Owner, Page } from "../domain/ports.js";
import type { BlobStore } from "../stores/blob-store.js";
import { blobLines, clientView } from "./client-view.js";
import { type LineErrors, lineErrors } from "./line-errors.js";
import type { BatchRecords, FileRecords, WorkQueue } from "./ports.js";

/** Batches a search looks through per page before it answers with what it found. */
const SEARCH_SCAN = 5_000;

export interface ClusterBatchViewsDeps {
  batches: BatchRecords;
  queue: WorkQueue;
  files: FileRecords;
  blobs: BlobStore;
  registry: ModelRegistry;
  now: () => number;
}

export class ClusterBatchViews implements BatchViews {
  constructor(private readonly deps: ClusterBatchViewsDeps) {}

  private view(batch: Batch): Batch {
    return clientView(batch, this.deps.registry, this.deps.now());
  }

  async inspect(id: string, owner: Owner): Promise<BatchInspection | undefined> {
    const row = await this.deps.batches.get(id, owner);
    if (!row) return undefined;
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
    const text = q.text?.toLowerCase();
    const data: ListedBatch[] = [];
    let after = q.after;
    let scanned = 0;
    for (;;) {
      const page = await this.deps.batches.list({ after, limit: 100, owner: q.owner });
      for (const b of page.data) {
        scanned++;
        after = b.id;
        if (q.status && b.status !== q.status) continue;
        if (q.model && b.model !== q.model) continue;
        if (q.endpoint && b.endpoint !== q.endpoint) continue;
        const filename = (await this.deps.files.get(b.input_file_id, q.owner))?.object.filename ?? null;
        if (text && !matches(b, filename, text)) continue;
        data.push({ ...this.view(b), input_filename: filename });
        if (data.length === q.limit) return { data, has_more: true };
      }
      if (!page.has_more) return { data, has_more: false };
      // A bounded scan per request: a filter that matches little answers with what it found and a cursor onward.
      if (scanned >= SEARCH_SCAN) return { data, has_more: true };
    }
  }
}

/**
 * The console's search: every word must match. `key=value` is a metadata entry (both without regard to case); any
 * other word is part of the id, the input's file name, or a metadata key or value.
 */
function matches(b: Batch, filename: string | null, text: string): boolean {
  const metadata = Object.entries(b.metadata ?? {});
  const haystack = [b.id, filename ?? "", ...metadata.flat()].join("\n").toLowerCase();
  return text
    .split(/\s+/)
    .filter(Boolean)
    .every((word) => {
      const eq = word.indexOf("=");
      if (eq <= 0) return haystack.includes(word);
      const [key, value] = [word.slice(0, eq), word.slice(eq + 1)];
      return metadata.some(([k, v]) => k.toLowerCase() === key && v.toLowerCase() === value);
    });
}
