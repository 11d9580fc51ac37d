// Ends a batch whose shards are all done: the output file is assembled by streaming the shards' committed parts
// in the batch's output order (state/output-order.ts: what a reader saw while it ran is the file's start), the
// error file by streaming them in shard order; both are recorded under ids derived from the batch id, and only then does the batch take
// its final status (a conditional update). Every step can run again after a crash with the same result.
import { Readable } from "node:stream";
import type pino from "pino";
import { isFinal, transition } from "../domain/batch-state.js";
import type { Batch } from "../domain/objects.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import { batchKeys, resultFileId } from "../state/blob-layout.js";
import { type OutputOrder, orderedLines, outputKeys, PartGone } from "../state/output-order.js";
import type { BatchRecords, BatchRow, FileRecords, WorkQueue } from "../state/ports.js";
import { type BlobStore, concatenated } from "../stores/blob-store.js";
import { type WebhookTargets, webhookEvent } from "./webhooks.js";

export interface FinalizeDeps {
  batches: BatchRecords;
  queue: WorkQueue;
  files: FileRecords;
  blobs: BlobStore;
  logger: pino.Logger;
  /** Unix seconds. */
  now: () => number;
  metrics?: BatchMetrics;
  /** Where ended batches' events go (none: no webhooks). */
  webhooks?: WebhookTargets;
}

export async function finalizeBatch(deps: FinalizeDeps, id: string): Promise<Batch | undefined> {
  const { batches, queue, now, logger } = deps;
  const row = await batches.get(id);
  if (!row || isFinal(row.batch.status)) return undefined;
  const shards = await queue.ofBatch(id);
  if (shards.some((s) => s.state !== "done")) return undefined;
  const to = row.stopReason ?? "completed";
  if (to === "completed" && row.batch.status !== "finalizing") {
    await batches.update(id, ["validating", "in_progress"], ({ batch }) => {
      if (batch.status === "validating") transition(batch, "in_progress", now());
      transition(batch, "finalizing", now());
    });
  }
  const parts = shards.flatMap((s) => s.parts);
  const order = await queue.outputOrder(id);
  if (!order) return undefined;
  const fileIds = {
    output: await assemble(deps, row, "output", outputKeys(parts), order),
    error: await assemble(
      deps,
      row,
      "error",
      parts.flatMap((p) => (p.errors ? [p.errors] : [])),
    ),
  };
  // Every line has its result or its error line: whatever the counts lack (a part that could not be written) is failed.
  await deps.batches.settleCounts(id);
  const done = await batches.update(id, ["validating", "in_progress", "finalizing", "cancelling"], (r) => {
    const { batch } = r;
    batch.output_file_id = fileIds.output;
    batch.error_file_id = fileIds.error;
    if (to === "completed") {
      if (batch.status === "validating") transition(batch, "in_progress", now());
      if (batch.status === "in_progress") transition(batch, "finalizing", now());
    }
    if (to === "cancelled" && batch.status !== "cancelling" && batch.status !== "validating") transition(batch, "cancelling", now());
    transition(batch, to, now());
    batch.deadline_met =
      batch.status === "completed" ? (batch.completed_at ?? 0) <= batch.deadline_at : batch.status === "expired" ? false : null;
    // In the same write as the final status: a crash after it still has the event to deliver.
    r.webhook = webhookEvent(batch, r.owner, deps.webhooks, now()) ?? null;
  });
  if (!done) return undefined;
  const b = done.batch;
  deps.metrics?.batchEnded(b);
  const fields = { batch_id: id, status: b.status, pool: b.pool, request_counts: b.request_counts, deadline_met: b.deadline_met };
  if (b.deadline_met === false) logger.warn(fields, "batch missed its deadline");
  else logger.info(fields, `batch ${b.status}`);
  // The parts are in the assembled files now; with them go the parts a fenced worker uploaded but never committed.
  await deps.blobs
    .deletePrefix(batchKeys(id).shards)
    .catch((err) =>
      logger.warn({ err: (err as Error).message, batch_id: id }, "cannot delete the batch's parts; they are removed with the batch"),
    );
  return b;
}

/**
 * Streams the parts into one object (output lines in `order`, then any a shard holds past it) and records it as a
 * file; null when there are no lines of that kind.
 */
async function assemble(
  deps: FinalizeDeps,
  row: BatchRow,
  kind: "output" | "error",
  keys: string[],
  order?: OutputOrder,
): Promise<string | null> {
  if (keys.length === 0) return null;
  const key = kind === "output" ? batchKeys(row.batch.id).output : batchKeys(row.batch.id).errors;
  // A shard run in place wrote a one-shard batch's results where they belong: there is nothing to assemble.
  const inPlace = keys.length === 1 && keys[0] === key;
  const content = () =>
    order ? Readable.from(lined(orderedLines(deps.blobs, order, { rest: true }))) : Readable.from(concatenated(deps.blobs, keys, partGone));
  const size = inPlace ? await deps.blobs.size(key) : await deps.blobs.put(key, content());
  if (size === undefined) throw new Error(`the batch's ${kind} file '${key}' is gone from storage`);
  const file = await deps.files.record({
    id: resultFileId(row.batch.id, kind),
    key,
    size,
    filename: `${row.batch.id}_${kind}.jsonl`,
    purpose: "batch_output",
    owner: row.owner,
    expiresAfter: row.outputExpiresAfter,
  });
  return file.id;
}

async function* lined(lines: AsyncIterable<string>): AsyncGenerator<string> {
  for await (const line of lines) yield `${line}\n`;
}

const partGone = (key: string) => new PartGone(key);
