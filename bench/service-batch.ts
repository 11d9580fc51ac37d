// One batch through a running server, the way a user submits it: upload the file, create the batch,
// poll until it is final. The clock runs from the start of the upload to the poll that sees it final.
import path from "node:path";
import { writeBatchFile } from "../testkit/workload.js";
import type { BenchServer } from "./server.js";
import { type Batch, createBatch, uploadFile, waitForTimedBatch } from "./timed-batches.js";

export interface ServiceBatchResult {
  seconds: number;
  uploadMs: number;
  /** POST /v1/batches, which validates the whole file before it answers. */
  createMs: number;
  /** From the start of the upload to each result line appearing in output.jsonl. */
  latenciesMs: number[];
  batch: Batch;
}

export async function runServiceBatch(
  server: BenchServer,
  lines: readonly object[],
  opts: { pollMs?: number; name?: string } = {},
): Promise<ServiceBatchResult> {
  const file = path.join(server.batchDir, `${opts.name ?? "bench"}-input.jsonl`);
  await writeBatchFile(file, lines);
  const started = performance.now();
  const fileId = await uploadFile(server.baseUrl, file);
  const uploaded = performance.now();
  const created = await createBatch(server.baseUrl, fileId);
  const createdAt = performance.now();
  if (created.status === "failed") throw new Error(`the batch failed validation: ${JSON.stringify(created.errors)}`);
  const { batch, seenAt, outputLineTimes } = await waitForTimedBatch(server.baseUrl, created.id, opts.pollMs ?? 25, {
    folder: path.join(server.batchDir, created.id),
    lines: lines.length,
  });
  const seconds = (seenAt - started) / 1000;
  if (batch.status !== "completed" || batch.request_counts.failed > 0) {
    throw new Error(`the batch ended ${batch.status} with counts ${JSON.stringify(batch.request_counts)}`);
  }
  return {
    seconds,
    uploadMs: uploaded - started,
    createMs: createdAt - uploaded,
    latenciesMs: outputLineTimes.map((t) => t - started),
    batch,
  };
}
