// Prefix families: a prompt whose opening another sequence of the same context holds (or is about to hold)
// gets that part of the KV cache copied instead of evaluated again. llama.cpp copies one sequence's cache into
// another with `llama_memory_seq_cp`; node-llama-cpp 3.22.1 reaches it only through the internal
// `LlamaContextSequence._copyStateFromOtherSequence`, so it is used behind `canCopyState` and the plain path
// (evaluate the whole prompt) stays the fallback. tests/engine/prefix-share.int.test.ts pins both against the real
// library: an upgrade that renames or changes it fails there, loudly, instead of running slower unnoticed.
//
// With one KV stream per sequence (node-llama-cpp sets kv_unified off) the copy is of the whole stream, done by
// llama.cpp at the start of the context's next decode; the tokens past the shared prefix are then erased.
//
// The memory copy is cheap (a few MB for a small model); the wait is not. On the prebuilt build the copy takes
// node-llama-cpp's context lock, which its dispatch loop holds for as long as any sequence of the context has a
// decode queued: the context is paused for it (context-pause.ts), so it waits about a decode and holds the context's
// other sequences that long. Hence the threshold below, chosen while such a copy still waited 1.3-3 s for the
// generating sequences to end (docs/performance.md).
import type { LlamaContextSequence, Token } from "node-llama-cpp";

/**
 * Below this many tokens gained a copy is not worth its wait (see above): short shared openings copied beside
 * generating sequences made whole runs slower, long ones gain as much at 128 (docs/performance.md).
 */
export const MIN_COPY_TOKENS = 128;

/**
 * The same threshold where copies are queued into the next decode (the patched build, kv-ops.ts): a copy then
 * waits for nothing, and costs a memory copy of the donor's KV stream (about 16 MB for `small` at 1,024 cells) or,
 * with a unified cache, nothing. Below this a copy spares less than its bookkeeping.
 */
export const MIN_QUEUED_COPY_TOKENS = 8;

/**
 * A donor that itself waits to copy another's prefix is ready a decode later than the one it waits for, so when
 * lines start together and each picks the earlier prompt it shares most with, waits chain and the lines join over
 * many decodes: 64 uniform lines sharing a ~10-token opening (`small`, one context) joined over 10 decodes
 * (1, 4, 8, 18, 27, 37, 48, 56, 61, 64 sequences), and ended as staggered. Such a donor is taken only when it
 * spares this many tokens more than the best donor that does not wait: a whole document after a shared
 * instruction, not a few words of a name.
 */
export const MIN_CHAINED_COPY_GAIN = 64;

/**
 * Whose prompts a sequence's cache may serve (Borrower.cacheScope): a key's, or those of the keys sharing a cache.
 * Undefined is one scope of its own (a caller that names none: the runner, the tests).
 */
export type CacheScope = string | undefined;

/** Held by a sequence whose cache may hold anyone's tokens (a copy that went wrong): it serves no scope. */
export const UNKNOWN_HOLDER = "\u0000unknown";

interface Claim {
  tokens: readonly Token[];
  scope: CacheScope;
  /** Claims are numbered: a request only waits for an earlier one, so no two wait for each other. */
  order: number;
  evaluated: boolean;
  /** Waiting for another claim's prompt, to copy it (see MIN_CHAINED_COPY_GAIN). */
  waiting: boolean;
  ready: Promise<void>;
  resolve: () => void;
}

export interface Donor {
  sequence: LlamaContextSequence;
  /** Leading prompt tokens the donor holds or will hold once `ready` settles. */
  shared: number;
  ready?: Promise<void>;
}

type CopyFn = (other: LlamaContextSequence, upToTokenIndex: number) => Promise<boolean>;

/** Whether this node-llama-cpp can copy one sequence's cache into another (see the file's comment). */
export function canCopyState(sequence: LlamaContextSequence): boolean {
  const copy = (sequence as unknown as { _copyStateFromOtherSequence?: unknown })._copyStateFromOtherSequence;
  return typeof copy === "function" && copy.length === 2;
}

/** Copies `donor`'s cache into `target` and keeps its first `upTo` tokens; false when the library declined. */
export function copyState(target: LlamaContextSequence, donor: LlamaContextSequence, upTo: number): Promise<boolean> {
  const copy = (target as unknown as { _copyStateFromOtherSequence: CopyFn })._copyStateFromOtherSequence;
  return copy.call(target, donor, upTo);
}

export function commonPrefix(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** What each lent sequence's prompt is, and whether it has been evaluated yet. */
export class PrefixClaims {
  private readonly claims = new Map<LlamaContextSequence, Claim>();
  /** Stands for an unclaimed sequence's cache until it is claimed again (a memo key: see bestDonor). */
  private readonly idle = new Map<LlamaContextSequence, object>();
  /** The scope whose prompt each sequence's cache holds: its tokens serve no other scope's prompt. */
  private readonly holders = new Map<LlamaContextSequence, CacheScope>();
  private next = 0;

  claim(sequence: LlamaContextSequence, tokens: readonly Token[], scope: CacheScope): void {
    this.drop(sequence);
    let resolve!: () => void;
    const ready = new Promise<void>((r) => (resolve = r));
    this.claims.set(sequence, { tokens, scope, order: this.next++, evaluated: false, waiting: false, ready, resolve });
    this.idle.delete(sequence);
  }

  /** The sequence's cache now holds (or is cut to nothing but) `scope`'s prompt. */
  hold(sequence: LlamaContextSequence, scope: CacheScope): void {
    this.holders.set(sequence, scope);
  }

  /** How many leading tokens of `tokens` the sequence's cache holds for `scope`: none where it holds another's. */
  visiblePrefix(sequence: LlamaContextSequence, tokens: readonly Token[], scope: CacheScope): number {
    return this.holds(sequence, scope) ? cachedPrefix(sequence, tokens) : 0;
  }

  /** Whether the sequence's cache holds `scope`'s prompt (or nothing yet said to be anyone's, for no scope). */
  holds(sequence: LlamaContextSequence, scope: CacheScope): boolean {
    return this.holders.get(sequence) === scope;
  }

  isClaimed(sequence: LlamaContextSequence): boolean {
    return this.claims.has(sequence);
  }

  /** The sequence's prompt is in its cache: those waiting to copy it may go on. */
  evaluated(sequence: LlamaContextSequence): void {
    const claim = this.claims.get(sequence);
    if (!claim || claim.evaluated) return;
    claim.evaluated = true;
    claim.resolve();
  }

  /** The sequence waits for (or no longer waits for) a donor's prompt before copying it. */
  waiting(sequence: LlamaContextSequence, waiting: boolean): void {
    const claim = this.claims.get(sequence);
    if (claim) claim.waiting = waiting;
  }

  /** The sequence is free again (or failed): nobody waits for it any more. */
  drop(sequence: LlamaContextSequence): void {
    const claim = this.claims.get(sequence);
    if (!claim) return;
    claim.resolve();
    this.claims.delete(sequence);
    this.idle.set(sequence, {});
  }

  /**
   * How much of `tokens` a sequence among `others` holds or will hold: an unclaimed sequence by its cache, a
   * claimed one by its prompt, in `scope` alone (another scope's prompt is never copied into this one's sequence, so
   * no key learns from a cached token count or a faster answer what another key asked). With `asker`, only prompts
   * claimed before the asker's (or already evaluated) count.
   * `memo` (one per prompt) keeps each comparison until that sequence is claimed or freed again: a waiting request
   * is scored against every freed sequence's context, and long shared prompts are long to compare.
   */
  bestDonor(
    tokens: readonly Token[],
    others: readonly LlamaContextSequence[],
    scope: CacheScope,
    asker?: LlamaContextSequence,
    memo?: WeakMap<object, number>,
  ): Donor | undefined {
    const mine = asker ? this.claims.get(asker)?.order : undefined;
    let best: Donor | undefined;
    // With an asker, donors that themselves wait for one compete apart (MIN_CHAINED_COPY_GAIN).
    let chained: Donor | undefined;
    for (const other of others) {
      if (other === asker || other.disposed) continue;
      const claim = this.claims.get(other);
      if ((claim ? claim.scope : this.holders.get(other)) !== scope) continue;
      if (claim && !claim.evaluated && mine !== undefined && claim.order > mine) continue;
      const key = claim ?? this.idleKey(other);
      let shared = memo?.get(key);
      if (shared === undefined) {
        shared = claim ? commonPrefix(claim.tokens, tokens) : cachedPrefix(other, tokens);
        memo?.set(key, shared);
      }
      const donor = { sequence: other, shared, ready: claim && !claim.evaluated ? claim.ready : undefined };
      if (asker && claim?.waiting && !claim.evaluated) {
        if (!chained || shared > chained.shared) chained = donor;
      } else if (!best || shared > best.shared) best = donor;
    }
    if (chained && chained.shared >= (best?.shared ?? 0) + MIN_CHAINED_COPY_GAIN) return chained;
    return best;
  }

  private idleKey(sequence: LlamaContextSequence): object {
    let key = this.idle.get(sequence);
    if (!key) {
      key = {};
      this.idle.set(sequence, key);
    }
    return key;
  }
}

/** How many leading tokens of `tokens` the sequence's cache already holds. */
export function cachedPrefix(sequence: LlamaContextSequence, tokens: readonly Token[]): number {
  return tokens.length === 0 ? 0 : sequence.compareContextTokens(tokens as Token[]).firstDifferentIndex;
}
