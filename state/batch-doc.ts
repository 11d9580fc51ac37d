// A stored batch document with the live counts that shard checkpoints add merged in,
// each field where the document has it (a store that reorders fields parses the result through the schema).
// A batch whose lines run on several models (a base and its adapters; an inline batch naming several) keeps the
// same counts per model too, added by each commit under its shard's model, so usage and cost are each model's.
import type { Batch, ModelUsage } from "../domain/objects.js";
import type { ClaimedShard, ShardCommit } from "./ports.js";

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

/** One model's counts in a batch over several: its lines (`total`) and what their commits added. */
export interface ModelCounts extends LiveCounts {
  model: string;
  total: number;
}

export const noCounts = (): LiveCounts => ({
  completed: 0,
  failed: 0,
  inputTokens: 0,
  cachedTokens: 0,
  outputTokens: 0,
  cachedLines: 0,
  cachedOutputTokens: 0,
  spotSeconds: 0,
  dedicatedSeconds: 0,
});

/**
 * Each model's counts, at zero, in the order the shards first name them, where they name several; undefined for a
 * batch of one model (its own counts are that model's).
 */
export function modelCountsOf(shards: ReadonlyArray<{ model?: string; total: number }>, batchModel?: string): ModelCounts[] | undefined {
  const byModel = new Map<string, ModelCounts>();
  for (const s of shards) {
    const model = s.model ?? batchModel ?? "";
    const c = byModel.get(model) ?? { model, total: 0, ...noCounts() };
    c.total += s.total;
    byModel.set(model, c);
  }
  return byModel.size > 1 ? [...byModel.values()] : undefined;
}

/** Adds a commit into counts, its engine time under the pool of the shard's claim. */
export function addCommit(n: LiveCounts, commit: ShardCommit, pool: ClaimedShard["pool"]): void {
  n.completed += commit.completed;
  n.failed += commit.failed;
  n.inputTokens += commit.usage.promptTokens;
  n.cachedTokens += commit.usage.cachedTokens;
  n.outputTokens += commit.usage.completionTokens;
  n.cachedLines = (n.cachedLines ?? 0) + (commit.cached?.lines ?? 0);
  n.cachedOutputTokens = (n.cachedOutputTokens ?? 0) + (commit.cached?.outputTokens ?? 0);
  if (pool && commit.seconds) n[pool === "spot" ? "spotSeconds" : "dedicatedSeconds"] += commit.seconds;
}

const round = (s: number) => Math.round(s * 1000) / 1000;

/** The counts as the batch object shows them (its request total is the document's). */
function shown(c: LiveCounts): Omit<ModelUsage, "request_counts" | "cost"> {
  return {
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

export function withCounts(doc: Batch, c: LiveCounts, models?: readonly ModelCounts[]): Batch {
  const batch: Batch = {
    ...doc,
    request_counts: { completed: c.completed, failed: c.failed, total: doc.request_counts.total },
    ...shown(c),
  };
  if (models?.length)
    batch.usage_by_model = Object.fromEntries(
      models.map((m) => [m.model, { request_counts: { completed: m.completed, failed: m.failed, total: m.total }, ...shown(m) }]),
    );
  return batch;
}
