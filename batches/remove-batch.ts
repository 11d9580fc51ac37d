// Deleting a batch with everything stored under it: its shards' parts, its copy of the input (or the upload it
// read, once nothing else names it), and its result files. The collector runs it for batches past their
// retention, keeping result files that their own retention still holds; a delete asked for takes them too.

import { batchKeys } from "../state/blob-layout.js";
import type { BatchRecords, FileRecords } from "../state/ports.js";
import type { BlobStore } from "../stores/blob-store.js";

export interface RemoveBatchDeps {
  batches: BatchRecords;
  files: FileRecords;
  blobs: BlobStore;
}

export async function removeBatch(deps: RemoveBatchDeps, id: string, opts: { withResults: boolean }): Promise<void> {
  const { batches, files, blobs } = deps;
  const row = await batches.get(id);
  await blobs.deletePrefix(batchKeys(id).shards);
  const { orphanInput } = await batches.remove(id);
  if (orphanInput) await blobs.delete(orphanInput);
  const results = [row?.batch.output_file_id, row?.batch.error_file_id].filter((f): f is string => Boolean(f));
  if (opts.withResults) for (const f of results) await files.remove(f);
  // Whatever is left under the batch's id goes too, unless a result file (by its own retention) still holds it.
  const held = await Promise.all(results.map((f) => files.get(f, row?.owner ?? null)));
  if (held.every((f) => !f)) await blobs.deletePrefix(`${id}/`);
}
