// A lent sequence made ready for its prompt: a sibling's longer prefix copied into it (queued into the next decode
// on the patched build, kv-ops.ts; under the context lock on the prebuilt one), then its cache cut to what the
// prompt shares, so only the rest is evaluated.
import type { LlamaContextSequence, Token } from "node-llama-cpp";
import { queueCopy, queueTruncate } from "./kv-ops.js";
import { cachedPrefix, copyState } from "./prefix-share.js";
import type { SequenceChoice } from "./sequence-choice.js";

/** Copies a sibling's longer prefix into `sequence`; says how much its own cache held before, when it did. */
export async function copyPrefix(
  choice: SequenceChoice,
  sequence: LlamaContextSequence,
  tokens: readonly Token[],
  queued: boolean,
): Promise<{ before: number } | undefined> {
  const before = cachedPrefix(sequence, tokens);
  const donor = choice.donorFor(sequence, tokens, before);
  if (!donor) {
    choice.claims.waiting(sequence, false);
    return undefined;
  }
  await donor.ready;
  // Its copy and its own tail now go into the next decode, as a prompt evaluated whole would.
  choice.claims.waiting(sequence, false);
  if (sequence.disposed || donor.sequence.disposed) return undefined;
  if (queued) {
    // What the donor's cells hold now: its decoded tokens (a donor freed meanwhile may hold less).
    const upTo = Math.min(cachedPrefix(donor.sequence, tokens), tokens.length - 1);
    if (upTo - before < choice.minCopy) return undefined;
    queueCopy(sequence, donor.sequence, upTo);
    return { before };
  }
  try {
    if (await copyState(sequence, donor.sequence, Math.min(donor.shared, tokens.length - 1))) return { before };
  } catch {
    // The cache is left as the copy made it; reusePrefix erases whatever does not match the prompt.
  }
  return undefined;
}

/**
 * Align the sequence's cache with `tokens` and say how many leading tokens need no evaluation.
 * At least the last prompt token is always evaluated, since its logits give the first new token.
 */
export async function reusePrefix(sequence: LlamaContextSequence, tokens: readonly Token[], queued = false): Promise<number> {
  const shared = cachedPrefix(sequence, tokens);
  const keep = Math.max(0, Math.min(shared, tokens.length - 1));
  if (keep < sequence.nextTokenIndex) {
    if (queued) queueTruncate(sequence, keep);
    else await sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]);
  }
  return keep;
}
