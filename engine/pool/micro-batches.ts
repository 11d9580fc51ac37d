// How many passes over the weights llama.cpp makes for one planned decode. A decode is cut into micro-batches,
// each one graph computation: with one KV stream for every sequence (kv_unified, as llama-batched-bench -kvu)
// simply by size; with a KV stream per sequence (node-llama-cpp's default) llama.cpp's `split_equal` takes
// *consecutive* sequence ids with *equal* token counts, because attention is computed per stream on equal
// slices. So a step of 31 sequences with one token each and one 26-token prompt tail is two passes, and tails on
// sequences 3, 10 and 17 are three more. The count is what the engine's stats report (batch-order.ts), to say
// where decode time goes, since each extra pass costs beyond its tokens (docs/performance.md).
//
// This models llama.cpp's rule as shipped with node-llama-cpp 3.22.1 (src/llama-batch.cpp, split_equal with
// sequential = true; split_simple for one stream); it is a model, checked against llama.cpp's own log of its
// micro-batches (LLAMA_KV_CACHE_DEBUG) when written, not a measurement.

/** One sequence's share of a planned decode: its id (its KV stream) and how many of its tokens go in. */
export interface StepPart {
  sequence: number;
  tokens: number;
}

/**
 * Micro-batches for `parts` (in the order they are added to the batch), with `ubatch` tokens at most in each.
 * `unified`: one KV stream for all sequences.
 */
export function microBatches(parts: readonly StepPart[], ubatch: number, unified: boolean): number {
  const total = parts.reduce((n, p) => n + p.tokens, 0);
  if (total === 0) return 0;
  if (unified) return Math.ceil(total / ubatch);
  const left = parts.map((p) => p.tokens);
  let passes = 0;
  for (;;) {
    // The run: from the first sequence with tokens left, each next one in batch order whose id follows.
    const run: number[] = [];
    for (let i = 0; i < parts.length && run.length < ubatch; i++) {
      if (left[i] === 0) continue;
      if (run.length === 0 || parts[i].sequence === parts[run[run.length - 1]].sequence + 1) run.push(i);
    }
    if (run.length === 0) return passes;
    let take = Math.max(1, Math.floor(ubatch / run.length));
    for (const i of run) take = Math.min(take, left[i]);
    for (const i of run) left[i] -= take;
    passes++;
  }
}
