// Where a batch's objects live in the blob store: under its id, as BATCH_DIR/<batch_id>/ has always held a batch's
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

/** A shard's result part: the epoch in the name keeps a fenced worker's upload apart from its successor's. */
export const partKey = (s: Pick<ClaimedShard, "batchId" | "idx" | "epoch">, n: number, kind: "output" | "errors") =>
  `${s.batchId}/shards/${s.idx}/${s.epoch}-${n}.${kind}.jsonl`;

/** A batch's output or error file's id, derived from the batch id: finalizing twice (a crash in between) records one file. */
export function resultFileId(batchId: string, kind: "output" | "error"): string {
  return `file-${createHash("sha256").update(`${batchId}:${kind}`).digest("hex").slice(0, 24)}`;
}
