// A batch's output as it is committed, for readers while it runs: the lines from `after` on in its output order
// (state/output-order.ts), which is the final output file's order too, so a read that meets the batch ending
// (its parts removed once the file is assembled) goes on from the file at the same line.

import type { OutputLines } from "../domain/batch-reads.js";
import { isFinal } from "../domain/batch-state.js";
import type { Batch } from "../domain/objects.js";
import { batchKeys } from "../state/blob-layout.js";
import { orderedLines, orderedTotal, PartGone } from "../state/output-order.js";
import type { BatchRecords, WorkQueue } from "../state/ports.js";
import type { BlobStore } from "../stores/blob-store.js";

export async function readOutput(
  deps: { batches: BatchRecords; queue: WorkQueue; blobs: BlobStore },
  batch: Batch,
  q: { after: number; limit?: number },
): Promise<OutputLines | undefined> {
  const upTo = (committed: number) => Math.max(q.after, Math.min(committed, q.after + (q.limit ?? Number.POSITIVE_INFINITY)));
  if (isFinal(batch.status)) {
    // Its output file holds exactly its completed lines.
    const committed = batch.output_file_id ? batch.request_counts.completed : 0;
    const through = upTo(committed);
    return { status: batch.status, committed, through, lines: fileLines(deps.blobs, batch, q.after, through) };
  }
  const order = await deps.queue.outputOrder(batch.id);
  if (!order) return undefined;
  const committed = orderedTotal(order.entries);
  const through = upTo(committed);
  async function* lines(): AsyncGenerator<string> {
    let at = q.after;
    try {
      for await (const line of orderedLines(deps.blobs, order!, { after: q.after, limit: through - q.after })) {
        at++;
        yield line;
      }
    } catch (err) {
      if (!(err instanceof PartGone)) throw err;
      const ended = await deps.batches.get(batch.id);
      if (!ended || !isFinal(ended.batch.status)) throw err;
      yield* fileLines(deps.blobs, ended.batch, at, through);
    }
  }
  return { status: batch.status, committed, through, lines: lines() };
}

async function* fileLines(blobs: BlobStore, batch: Batch, after: number, through: number): AsyncGenerator<string> {
  if (!batch.output_file_id || through <= after) return;
  const order = { entries: [[0, through]] as Array<[number, number]>, keys: new Map([[0, [batchKeys(batch.id).output]]]) };
  yield* orderedLines(blobs, order, { after, limit: through - after });
}
