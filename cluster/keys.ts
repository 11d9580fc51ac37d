// Where a batch's objects live in the blob store: under its id, as BATCH_DIR/<batch_id>/ has always held a batch's
// files on one machine, so one layout serves a folder and a bucket alike.
import type { ClaimedShard } from "./ports.js";

export const batchKeys = (id: string) => ({
  output: `${id}/output.jsonl`,
  errors: `${id}/errors.jsonl`,
  /** Shard parts, removed once assembled. */
  shards: `${id}/shards/`,
});

/** A shard's result part: the epoch in the name keeps a fenced worker's upload apart from its successor's. */
export const partKey = (s: Pick<ClaimedShard, "batchId" | "idx" | "epoch">, n: number, kind: "output" | "errors") =>
  `${s.batchId}/shards/${s.idx}/${s.epoch}-${n}.${kind}.jsonl`;
