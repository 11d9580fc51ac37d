// Where a batch's objects live in the blob store: under its id, as BATCH_DIR/<batch_id>/ holds a batch's
// files on one machine, so one layout serves a folder and a bucket alike.
import { createHash } from "node:crypto";
import type { ClaimedShard } from "./ports.js";

export const batchKeys = (id: string) => ({
  /** The batch's own copy of its requests, where it keeps one. */
  input: `${id}/input.jsonl`,
  output: `${id}/output.jsonl`,
  errors: `${id}/errors.jsonl`,
  /** Shard parts, removed once assembled. */
  shards: `${id}/shards/`,
});

/**
 * A shard's result part, one key per upload attempt: a part never changes once written, so a commit whose reply
 * was lost cannot be overwritten by a retry with more lines, and a successor reads exactly what was committed.
 * The epoch and checkpoint number in the name are for people reading the bucket; `attempt` makes it unique.
 */
export const partKey = (s: Pick<ClaimedShard, "batchId" | "idx" | "epoch">, n: number, kind: "output" | "errors", attempt: string) =>
  `${s.batchId}/shards/${s.idx}/${s.epoch}-${n}-${attempt}.${kind}.jsonl`;

/** A batch's output or error file's id, derived from the batch id: finalizing twice (a crash in between) records one file. */
export function resultFileId(batchId: string, kind: "output" | "error"): string {
  return `file-${createHash("sha256").update(`${batchId}:${kind}`).digest("hex").slice(0, 24)}`;
}
