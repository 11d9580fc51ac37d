// A stored batch document with the live counts that shard checkpoints add merged in,
// each field where the document has it (a store that reorders fields parses the result through the schema).
import type { Batch } from "../domain/objects.js";

export interface LiveCounts {
  completed: number;
  failed: number;
  inputTokens: number;
  cachedTokens: number;
  outputTokens: number;
  /** Lines answered without running, and their answers' output tokens (absent in records kept before they were counted). */
  cachedLines?: number;
  cachedOutputTokens?: number;
  /** Engine time by pool: seconds the batch's shards held a slot there. */
  spotSeconds: number;
  dedicatedSeconds: number;
}

const round = (s: number) => Math.round(s * 1000) / 1000;

export function withCounts(doc: Batch, c: LiveCounts): Batch {
  return {
    ...doc,
    request_counts: { completed: c.completed, failed: c.failed, total: doc.request_counts.total },
    cached_lines: c.cachedLines ?? 0,
    usage: {
      input_tokens: c.inputTokens,
      input_tokens_details: { cached_tokens: c.cachedTokens },
      output_tokens: c.outputTokens,
      output_tokens_details: { reasoning_tokens: 0, cached_tokens: c.cachedOutputTokens ?? 0 },
      total_tokens: c.inputTokens + c.outputTokens,
    },
    engine_seconds: { spot: round(c.spotSeconds), dedicated: round(c.dedicatedSeconds) },
  };
}
