// Which sequence a prompt gets: among the free ones, the one that spares most of its evaluation (its own cached
// prefix, or a sibling's by a copy), the contexts sharing the work; and which waiting prompt a freed sequence suits.
// It keeps the prompts claimed on each context (prefix-share.ts), so a family goes where its prefix already is.
// A prompt sees only its own scope's cached prompts (Borrower.cacheScope): another key's is as an empty cache.
import type { LlamaContext, LlamaContextSequence, Token } from "node-llama-cpp";
import { type CacheScope, type Donor, PrefixClaims } from "./prefix-share.js";

/** The share of a prompt a sequence's cache must hold to count as holding its family (pick). */
const MIN_SHARED_SHARE = 0.1;

export class SequenceChoice {
  private readonly busy = new Map<LlamaContext, number>();
  private readonly siblings = new Map<LlamaContext, LlamaContextSequence[]>();
  readonly claims = new PrefixClaims();

  /**
   * `prefixCopy`: whether prefixes are copied between sequences of a context; `minCopy`: the fewest prompt tokens a
   * copy must spare (prefix-share.ts).
   */
  constructor(
    private readonly contexts: readonly LlamaContext[],
    sequences: readonly LlamaContextSequence[],
    readonly prefixCopy: boolean,
    readonly minCopy: number,
  ) {
    for (const context of contexts) {
      this.busy.set(context, 0);
      this.siblings.set(
        context,
        sequences.filter((s) => s.context === context),
      );
    }
  }

  /** The sequences of `context`, in their order. */
  siblingsOf(context: LlamaContext): readonly LlamaContextSequence[] {
    return this.siblings.get(context) ?? [];
  }

  /** A sequence was lent (`+1`) or returned (`-1`): its context's load, which ties are broken by. */
  load(sequence: LlamaContextSequence, delta: 1 | -1): void {
    this.busy.set(sequence.context, (this.busy.get(sequence.context) ?? 0) + delta);
  }

  /**
   * Claims the sequence for the prompt, and says at once whether it will wait for a donor's prompt to copy it, so
   * the requests picked right after this one know (MIN_CHAINED_COPY_GAIN in prefix-share.ts).
   */
  claim(sequence: LlamaContextSequence, tokens: readonly Token[], scope: CacheScope): void {
    const before = this.claims.visiblePrefix(sequence, tokens, scope);
    this.claims.claim(sequence, tokens, scope);
    if (this.donorFor(sequence, tokens, before, scope)?.ready) this.claims.waiting(sequence, true);
  }

  /** The sibling whose prefix `sequence` should copy: one sparing at least minCopy tokens beyond `before` (its own cache). */
  donorFor(sequence: LlamaContextSequence, tokens: readonly Token[], before: number, scope: CacheScope): Donor | undefined {
    const donor = this.claims.bestDonor(tokens, this.siblingsOf(sequence.context), scope, sequence);
    // The last prompt token is evaluated anyway (its logits give the first new token).
    const gain = Math.min(donor?.shared ?? 0, tokens.length - 1) - before;
    return donor && gain >= this.minCopy ? donor : undefined;
  }

  /**
   * How well a freed sequence suits a waiting prompt: what it would not evaluate there, and below a copy's worth,
   * -1 when its family's prefix sits on another context (a new family's head should take this one, and the
   * prompt wait for a sequence beside its family; pool.ts bounds how long).
   */
  affinity(sequence: LlamaContextSequence, tokens: readonly Token[], scope: CacheScope, memo: WeakMap<object, number>): number {
    const reach = this.reach(sequence, tokens, scope, this.viaCopy(sequence.context, tokens, scope, memo));
    if (!this.prefixCopy || reach >= this.minCopy) return reach;
    const elsewhere = this.contexts.some((c) => c !== sequence.context && this.viaCopy(c, tokens, scope, memo) >= this.minCopy);
    return elsewhere ? -1 : reach;
  }

  /**
   * The free sequence sharing the longest prefix with the prompt; on a tie, the one on the least busy context
   * (so the contexts share the work), then the most recently released.
   */
  pick(free: readonly LlamaContextSequence[], tokens: readonly Token[], scope: CacheScope, memo: WeakMap<object, number>): number {
    let best = free.length - 1;
    let bestKey = [-1, 0];
    // What each context could give by a copy: families go where their prefix already is.
    const donors = new Map<LlamaContext, number>();
    for (let i = free.length - 1; i >= 0; i--) {
      const context = free[i].context;
      if (!donors.has(context)) donors.set(context, this.viaCopy(context, tokens, scope, memo));
      const reach = this.reach(free[i], tokens, scope, donors.get(context) ?? 0);
      // A few shared opening tokens are no family: below a tenth of the prompt (llama-server's slot similarity)
      // the sequence counts as holding nothing of it, and the one released longest ago is taken, so a prompt
      // of a new family does not evict the family just served.
      const length = reach >= Math.max(2, Math.ceil(tokens.length * MIN_SHARED_SHARE)) ? reach : 0;
      const idle = -(this.busy.get(free[i].context) ?? 0);
      const older = length === 0 && bestKey[0] === 0 && idle === bestKey[1];
      if (length > bestKey[0] || (length === bestKey[0] && idle > bestKey[1]) || older) {
        best = i;
        bestKey = [length, idle];
      }
    }
    return best;
  }

  /** How much of `tokens` a request given `sequence` would not evaluate: its cache, or a sibling's by a copy. */
  private reach(sequence: LlamaContextSequence, tokens: readonly Token[], scope: CacheScope, viaCopy: number): number {
    const own = this.claims.visiblePrefix(sequence, tokens, scope);
    return viaCopy >= own + this.minCopy ? viaCopy : own;
  }

  private viaCopy(context: LlamaContext, tokens: readonly Token[], scope: CacheScope, memo?: WeakMap<object, number>): number {
    if (!this.prefixCopy || tokens.length === 0) return 0;
    return this.claims.bestDonor(tokens, this.siblingsOf(context), scope, undefined, memo)?.shared ?? 0;
  }
}
