// Retrying a finished batch's failed lines: those of its error file that the filter wants (by code, cancelled,
// expired) become a new batch's input, taken from its own input file, and the new batch names the old in its metadata.
import { createWriteStream } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { pipeline } from "node:stream/promises";
import { servedEndpoint } from "../domain/batch-object.js";
import { isFinal } from "../domain/batch-state.js";
import { InvalidRequestError, NotFoundError } from "../domain/errors.js";
import type { Batch } from "../domain/objects.js";
import type { Owner } from "../domain/ports.js";
import { errorCodeOf, type RetryFilter, retryMetadata, wantsRetry } from "../domain/retry.js";
import { readCompleteJsonLines } from "../pipeline/jsonl.js";
import { admitFile } from "./adapter-batches.js";
import type { Admission, ClusterBatchServiceDeps } from "./admission.js";
import { blobLines } from "./blob-lines.js";

/** A new batch of `id`'s failed lines that `filter` wants, as stored (the caller shows it to the client). */
export async function retryFailedLines(
  deps: ClusterBatchServiceDeps,
  admission: Admission,
  id: string,
  owner: Owner,
  filter: RetryFilter,
): Promise<Batch> {
  const { batches, files, blobs } = deps;
  const row = await batches.get(id, owner);
  if (!row) throw new NotFoundError("batch", id);
  const { batch } = row;
  if (!isFinal(batch.status)) {
    throw new InvalidRequestError(
      `Batch '${id}' is ${batch.status}; only a finished batch's failed lines can be retried.`,
      "batch_not_finished",
      "batch_id",
    );
  }
  const errorFile = batch.error_file_id ? await files.keyOf(batch.error_file_id, owner) : undefined;
  const wanted = new Set<string>();
  for await (const text of blobLines(blobs, errorFile ? [errorFile.key] : [])) {
    const line = JSON.parse(text) as Parameters<typeof errorCodeOf>[0] & { custom_id?: unknown };
    if (typeof line.custom_id === "string" && wantsRetry(errorCodeOf(line), filter)) wanted.add(line.custom_id);
  }
  if (wanted.size === 0) {
    const why = batch.errors?.data.length
      ? "its input file failed validation (see errors); upload a corrected file"
      : filter.codes || filter.include_cancelled === false || filter.include_expired === false
        ? "none of its failed lines matches the filter"
        : "none of its lines failed";
    throw new InvalidRequestError(`Batch '${id}' has nothing to retry: ${why}.`, "nothing_to_retry", null);
  }
  const input = row.inputKey ? await blobs.open(row.inputKey) : undefined;
  if (!input) throw new InvalidRequestError(`Batch '${id}' no longer has its input to retry from.`, "input_gone", "batch_id");
  const local = admission.scratchFile();
  try {
    await mkdir(deps.scratchDir, { recursive: true });
    await pipeline(retriedLines(readCompleteJsonLines(input.content), wanted), createWriteStream(local));
    const obj = await files.adopt({ tmpPath: local, filename: `${id}_retry.jsonl`, purpose: "batch", owner });
    try {
      // A base and its adapters' lines are grouped by model again, as at the create.
      return await admitFile(deps, admission, {
        owner,
        endpoint: servedEndpoint(batch.endpoint),
        completion_window: batch.completion_window,
        metadata: retryMetadata(batch.metadata, id),
        output_expires_after: row.outputExpiresAfter,
        inputFileId: obj.id,
        inputKey: (await files.keyOf(obj.id, owner))!.key,
      });
    } catch (err) {
      await files.delete(obj.id, owner).catch(() => undefined);
      throw err;
    }
  } finally {
    await rm(local, { force: true });
  }
}

/** The input's lines whose custom_id is wanted, each once (a batch's custom_ids are unique). */
async function* retriedLines(lines: AsyncIterable<string>, wanted: Set<string>): AsyncGenerator<string> {
  for await (const text of lines) {
    const id = (JSON.parse(text) as { custom_id?: unknown }).custom_id;
    if (typeof id === "string" && wanted.has(id)) yield `${text}\n`;
  }
}
