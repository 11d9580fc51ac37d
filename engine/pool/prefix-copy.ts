// A lent sequence made ready for its prompt: a sibling's longer prefix copied into it (queued into the next decode
// on the patched build, kv-ops.ts; under the context lock on the prebuilt one, with the context paused), then its
// cache cut to what the prompt shares, so only the rest is evaluated.
import type { LlamaContextSequence, Token } from "node-llama-cpp";
import { queueCopy, queueTruncate } from "./kv-ops.js";
import { type CacheScope, cachedPrefix, copyState, UNKNOWN_HOLDER } from "./prefix-share.js";
import type { SequenceChoice } from "./sequence-choice.js";

/**
 * Makes a change that takes node-llama-cpp's context lock (the prebuilt build's copies and cuts); the pool's own
 * pauses the context meanwhile (context-pause.ts).
 */
export type Locked = <T>(change: () => Promise<T>) => Promise<T>;
const unpaused: Locked = (change) => change();

/**
 * Copies a sibling's longer prefix of `scope` into `sequence`; says how much its own cache held for `scope` before,
 * when it did.
 */
export async function copyPrefix(
  choice: SequenceChoice,
  sequence: LlamaContextSequence,
  tokens: readonly Token[],
  scope: CacheScope,
  queued: boolean,
  locked: Locked = unpaused,
): Promise<{ before: number } | undefined> {
  const before = choice.claims.visiblePrefix(sequence, tokens, scope);
  const donor = choice.donorFor(sequence, tokens, before, scope);
  if (!donor) {
    choice.claims.waiting(sequence, false);
    return undefined;
  }
  await donor.ready;
  // Its copy and its own tail now go into the next decode, as a prompt evaluated whole would.
  choice.claims.waiting(sequence, false);
  if (sequence.disposed || donor.sequence.disposed) return undefined;
  // What the donor's cells hold now, for this scope: its decoded tokens (a donor freed meanwhile may hold less, and
  // one called off before its prompt still holds whoever's came before).
  const held = choice.claims.visiblePrefix(donor.sequence, tokens, scope);
  if (queued) {
    const upTo = Math.min(held, tokens.length - 1);
    if (upTo - before < choice.minCopy) return undefined;
    queueCopy(sequence, donor.sequence, upTo);
    choice.claims.hold(sequence, scope);
    return { before };
  }
  const upTo = Math.min(held, donor.shared, tokens.length - 1);
  if (upTo - before < choice.minCopy) return undefined;
  let copied = false;
  try {
    copied = await locked(() => copyState(sequence, donor.sequence, upTo));
  } catch {
    // The cache is left as the copy made it; reusePrefix erases whatever does not match the prompt.
  }
  // The copy waited for the context's lock: a donor lent to another scope meanwhile gave that scope's cells.
  const still = choice.claims.visiblePrefix(donor.sequence, tokens, scope) >= upTo;
  choice.claims.hold(sequence, copied && still ? scope : UNKNOWN_HOLDER);
  return copied && still ? { before } : undefined;
}

/**
 * Align the sequence's cache with `tokens` and say how many leading tokens need no evaluation.
 * At least the last prompt token is always evaluated, since its logits give the first new token.
 */
export async function reusePrefix(
  sequence: LlamaContextSequence,
  tokens: readonly Token[],
  queued = false,
  locked: Locked = unpaused,
): Promise<number> {
  const shared = cachedPrefix(sequence, tokens);
  const keep = Math.max(0, Math.min(shared, tokens.length - 1));
  if (keep < sequence.nextTokenIndex) {
    if (queued) queueTruncate(sequence, keep);
    else await locked(() => sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]));
  }
  return keep;
}
