// Generation contexts with N sequences in all, lent to requests one sequence each.
// node-llama-cpp gathers the pending tokens of all sequences of a context into one decode per step,
// so the requests in flight on a context are decoded together (continuous batching) without any work here.
// Several contexts decode at the same time, each on its own thread(s): on a CPU that is how every core
// computes without ggml's per-node barrier between threads (engine/README.md, "Contexts").
import {
  type EvaluationPriority,
  InsufficientMemoryError,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { BatchOrder, sequenceTag } from "./batch-order.js";
import { canQueueKvOps, queueCopy, queueTruncate } from "./kv-ops.js";
import { interactiveNow } from "./lane.js";
import { ResourcePool } from "./pool.js";
import {
  cachedPrefix,
  canCopyState,
  copyState,
  type Donor,
  MIN_COPY_TOKENS,
  MIN_QUEUED_COPY_TOKENS,
  PrefixClaims,
} from "./prefix-share.js";
import type { EngineOptions } from "./types.js";

type Log = NonNullable<EngineOptions["log"]>;

export interface SequencePoolOptions {
  /** Sequences wanted in all; when `auto`, fewer are taken if memory is short. */
  sequences: number;
  /** Generation contexts the sequences are spread over (default 1). */
  contexts?: number;
  auto: boolean;
  contextSize: number;
  /** A fixed count, or a range node-llama-cpp's thread splitter allots per decode (step-threads.ts). */
  threads: number | { ideal: number; min: number };
  /** Told each step's token count before it is decoded, and when no sequence is lent any more. */
  onStep?: (tokens: number) => void;
  onIdle?: () => void;
  /** See createEngine: "auto", as llama-server. */
  flashAttention: boolean | "auto";
  /** Reuse a sequence's cached prefix (default); off only to measure what reuse gains. */
  prefixReuse?: boolean;
  /** Copy a prefix another sequence of the context holds (prefix-share.ts; default on where the library can). */
  prefixCopy?: boolean;
  /** One KV stream for all sequences of a context (the patched build only; native.ts): a copy is then free. */
  kvUnified?: boolean;
  log: Log;
}

/** The share of a prompt a sequence's cache must hold to count as holding its family (pick). */
const MIN_SHARED_SHARE = 0.1;

/**
 * Sequences kept free for the interactive lane while it is warm (pool.ts): llama-server fed at its slots minus one
 * keeps one so; with fewer than four sequences the batches would give up too much of the engine for it.
 */
export const interactiveReserve = (sequences: number): number => (sequences >= 4 ? 1 : 0);
export class SequencePool {
  private readonly pool: ResourcePool<LlamaContextSequence>;
  private readonly tags = new Map<LlamaContextSequence, EvaluationPriority>();
  private readonly orderOf = new Map<LlamaContextSequence, BatchOrder>();
  private readonly busy = new Map<LlamaContext, number>();
  private readonly siblings = new Map<LlamaContext, LlamaContextSequence[]>();
  private readonly claims = new PrefixClaims();
  /** Whether prefixes are copied between sequences (prefix-share.ts): asked for, and the library can. */
  readonly prefixCopy: boolean;
  /** Copies and erases are queued into the next decode instead of waiting for the context lock (kv-ops.ts). */
  readonly queuedKvOps: boolean;
  /** The fewest prompt tokens a copy must spare: a queued copy costs little, a locked one waits (prefix-share.ts). */
  readonly minCopy: number;
  /** Prefix copies made, and the prompt tokens they spared. */
  readonly copyStats = { copies: 0, tokens: 0 };
  /** The contexts keep one KV cache for all their sequences (kv-choice.ts). */
  readonly kvUnified: boolean;
  /** Batch lines that gave their sequence to an interactive request, and the tokens they evaluated again after. */
  readonly yieldStats = { yields: 0, tokens: 0 };
  /** Sequences lent to batch work, in the order they were lent, and whether their first token came. */
  private readonly batchLent = new Map<LlamaContextSequence, { at: number; generating: boolean }>();
  private readonly yielding = new Set<LlamaContextSequence>();
  private lends = 0;

  private constructor(
    readonly contexts: readonly LlamaContext[],
    private readonly orders: readonly BatchOrder[],
    private readonly sequences: LlamaContextSequence[],
    private readonly prefixReuse: boolean,
    prefixCopy: boolean,
    kvUnified: boolean,
    private readonly onIdle?: () => void,
  ) {
    this.kvUnified = kvUnified;
    this.pool = new ResourcePool(sequences, interactiveReserve(sequences.length));
    this.queuedKvOps = canQueueKvOps(sequences[0]);
    this.prefixCopy = prefixReuse && prefixCopy && sequences.length > 1 && (this.queuedKvOps || canCopyState(sequences[0]));
    this.minCopy = this.queuedKvOps ? MIN_QUEUED_COPY_TOKENS : MIN_COPY_TOKENS;
    contexts.forEach((context, c) => {
      this.busy.set(context, 0);
      const mine = sequences.filter((s) => s.context === context);
      this.siblings.set(context, mine);
      for (const [i, s] of mine.entries()) {
        this.tags.set(s, sequenceTag(i));
        this.orderOf.set(s, orders[c]);
      }
    });
  }

  static async create(model: LlamaModel, opts: SequencePoolOptions): Promise<SequencePool> {
    let sequences = Math.max(1, Math.floor(opts.sequences));
    for (;;) {
      const count = Math.max(1, Math.min(sequences, Math.floor(opts.contexts ?? 1)));
      const contexts: LlamaContext[] = [];
      const orders: BatchOrder[] = [];
      try {
        for (let c = 0; c < count; c++) {
          // The sequences spread evenly: the first contexts take one more when they do not divide.
          const share = Math.floor(sequences / count) + (c < sequences % count ? 1 : 0);
          const order = new BatchOrder(opts.onStep, share, opts.kvUnified ?? false);
          contexts.push(
            await model.createContext({
              sequences: share,
              contextSize: opts.contextSize,
              threads: opts.threads,
              flashAttention: opts.flashAttention,
              failedCreationRemedy: false,
              batching: { itemPrioritizationStrategy: order.strategy },
              // Read by the patched build only (native.ts); the prebuilt addon ignores it.
              ...(opts.kvUnified ? { experimentalKvUnified: true } : {}),
            }),
          );
          orders.push(order);
        }
        const all = contexts.flatMap((context) => Array.from({ length: context.totalSequences }, () => context.getSequence()));
        return new SequencePool(
          contexts,
          orders,
          all,
          opts.prefixReuse ?? true,
          opts.prefixCopy ?? true,
          opts.kvUnified ?? false,
          opts.onIdle,
        );
      } catch (err) {
        await Promise.allSettled(contexts.map((c) => c.dispose()));
        // Each sequence holds its own contextSize of KV cache; halve until it fits, unless the count was asked for.
        if (!opts.auto || sequences === 1 || !(err instanceof InsufficientMemoryError)) throw err;
        const fewer = Math.max(1, Math.floor(sequences / 2));
        opts.log("not enough memory for the sequences; trying fewer", { sequences, next: fewer, contextSize: opts.contextSize });
        sequences = fewer;
      }
    }
  }

  get size(): number {
    return this.sequences.length;
  }

  /** How full the decodes have been (batch-order.ts): steps, sequences in them, turns spent waiting, passes. */
  get batchStats(): Readonly<BatchOrder["stats"]> {
    const sum = { steps: 0, sequences: 0, tokens: 0, waitTurns: 0, microBatches: 0 };
    for (const o of this.orders) for (const k of Object.keys(sum) as (keyof typeof sum)[]) sum[k] += o.stats[k];
    return sum;
  }

  /** Tokens each sequence holds (llama.cpp may round the requested size up). */
  get contextSize(): number {
    return this.contexts[0].contextSize;
  }

  /**
   * Lend a sequence for a request whose prompt is `tokens`. With several free, the one whose cached tokens
   * share the longest prefix with the prompt is taken, so repeated system prompts and few-shot headers are
   * evaluated once; with none free, a released sequence goes to the waiting request it shares most with.
   */
  async acquire(tokens: readonly Token[], signal?: AbortSignal, resumed = false): Promise<LlamaContextSequence> {
    const memo = new WeakMap<object, number>();
    const sequence = await this.pool.acquire(
      signal,
      (free) => {
        const index = this.pick(free, this.prefixReuse ? tokens : [], memo);
        // Claimed at once, so a request picking right after this one sees this prompt coming on this context.
        if (this.prefixCopy) this.claim(free[index], tokens);
        return index;
      },
      // A busy batch waits for sequences: a freed one goes to the waiting prompt that shares most with its cache,
      // or with what its context's other sequences hold (a copy away).
      this.prefixReuse && tokens.length > 0 ? (s) => this.affinity(s, tokens, memo) : undefined,
      resumed,
    );
    if (this.prefixCopy && !this.claims.isClaimed(sequence)) this.claim(sequence, tokens);
    this.busy.set(sequence.context, (this.busy.get(sequence.context) ?? 0) + 1);
    if (!interactiveNow()) this.batchLent.set(sequence, { at: this.lends++, generating: false });
    return sequence;
  }

  /**
   * Whether the batch line on `sequence` should give it to an interactive request now (asked at each of its tokens):
   * one waits that no other line is giving way to, and this is the line lent last of those generating, which has
   * the fewest tokens to evaluate again, as vLLM preempts the request that came last.
   */
  mustYield(sequence: LlamaContextSequence): boolean {
    if (this.pool.preempting <= this.yielding.size || !this.batchLent.has(sequence)) return false;
    let last: LlamaContextSequence | undefined;
    let at = -1;
    for (const [s, lent] of this.batchLent) {
      if (lent.generating && lent.at > at && !this.yielding.has(s)) [last, at] = [s, lent.at];
    }
    if (last !== sequence) return false;
    this.yielding.add(sequence);
    this.yieldStats.yields++;
    return true;
  }

  /**
   * Gives a yielding line's sequence back (to the interactive request waiting) and lends it another once one is
   * free, ahead of the batch lines not begun; `tokens` are its prompt and what it generated so far.
   */
  async resume(sequence: LlamaContextSequence, tokens: readonly Token[], signal?: AbortSignal): Promise<LlamaContextSequence> {
    await this.release(sequence);
    return this.acquire(tokens, signal, true);
  }

  /** A resumed line evaluated these tokens again (its cache went to the interactive request). */
  reevaluated(tokens: number): void {
    this.yieldStats.tokens += tokens;
  }

  /**
   * Claims the sequence for the prompt, and says at once whether it will wait for a donor's prompt to copy it, so
   * the requests picked right after this one know (MIN_CHAINED_COPY_GAIN in prefix-share.ts).
   */
  private claim(sequence: LlamaContextSequence, tokens: readonly Token[]): void {
    this.claims.claim(sequence, tokens);
    if (this.donorFor(sequence, tokens, cachedPrefix(sequence, tokens))?.ready) this.claims.waiting(sequence, true);
  }

  /** The sibling whose prefix `sequence` should copy: one sparing at least minCopy tokens beyond `before` (its own cache). */
  private donorFor(sequence: LlamaContextSequence, tokens: readonly Token[], before: number): Donor | undefined {
    const donor = this.claims.bestDonor(tokens, this.siblings.get(sequence.context) ?? [], sequence);
    // The last prompt token is evaluated anyway (its logits give the first new token).
    const gain = Math.min(donor?.shared ?? 0, tokens.length - 1) - before;
    return donor && gain >= this.minCopy ? donor : undefined;
  }

  /** How much of `tokens` a request given `sequence` would not evaluate: its cache, or a sibling's by a copy. */
  private reach(sequence: LlamaContextSequence, tokens: readonly Token[], viaCopy: number): number {
    const own = cachedPrefix(sequence, tokens);
    return viaCopy >= own + this.minCopy ? viaCopy : own;
  }

  private viaCopy(context: LlamaContext, tokens: readonly Token[], memo?: WeakMap<object, number>): number {
    if (!this.prefixCopy || tokens.length === 0) return 0;
    return this.claims.bestDonor(tokens, this.siblings.get(context) ?? [], undefined, memo)?.shared ?? 0;
  }

  /**
   * How well a freed sequence suits a waiting prompt: what it would not evaluate there, and below a copy's worth,
   * -1 when its family's prefix sits on another context (a new family's head should take this one, and the
   * prompt wait for a sequence beside its family; pool.ts bounds how long).
   */
  private affinity(sequence: LlamaContextSequence, tokens: readonly Token[], memo: WeakMap<object, number>): number {
    const reach = this.reach(sequence, tokens, this.viaCopy(sequence.context, tokens, memo));
    if (!this.prefixCopy || reach >= this.minCopy) return reach;
    const elsewhere = this.contexts.some((c) => c !== sequence.context && this.viaCopy(c, tokens, memo) >= this.minCopy);
    return elsewhere ? -1 : reach;
  }

  /** The sequence's prompt has been evaluated (its first token came): others may copy it now. */
  evaluated(sequence: LlamaContextSequence): void {
    this.claims.evaluated(sequence);
    const lent = this.batchLent.get(sequence);
    if (lent) lent.generating = true;
  }

  /**
   * The sequence's generation is over: decoding stops waiting for its next token (batch-order.ts). Unless a request
   * waits for a sequence: this one goes to it on release, and the next decode waits (a few turns) for that
   * request's prompt. Without it, the decode went on with a gap at this sequence, one more pass over the weights
   * (micro-batches.ts), and the prompt came a decode later: on families-8 1,584-1,637 passes against 1,415-1,484.
   */
  finished(sequence: LlamaContextSequence): void {
    if (this.pool.contended) return;
    this.orderOf.get(sequence)?.leave(this.batchTag(sequence));
  }

  /** Pass as `evaluationPriority` with every evaluation of `sequence`: it orders the batch (batch-order.ts). */
  batchTag(sequence: LlamaContextSequence): EvaluationPriority {
    return this.tags.get(sequence) ?? sequenceTag(0);
  }

  /**
   * Make a lent sequence ready for `tokens`; returns how many leading tokens need no evaluation. When another
   * sequence of the context holds (or is evaluating) a longer prefix of them, that prefix is copied from it.
   */
  async prepare(sequence: LlamaContextSequence, tokens: readonly Token[]): Promise<number> {
    const copied = this.prefixCopy ? await this.copyPrefix(sequence, tokens) : undefined;
    const keep = await reusePrefix(sequence, this.prefixReuse ? tokens : [], this.queuedKvOps);
    if (copied && keep > copied.before) {
      this.copyStats.copies++;
      this.copyStats.tokens += keep - copied.before;
    }
    return keep;
  }

  /** Copies a sibling's longer prefix into `sequence`; says how much its own cache held before, when it did. */
  private async copyPrefix(sequence: LlamaContextSequence, tokens: readonly Token[]): Promise<{ before: number } | undefined> {
    const before = cachedPrefix(sequence, tokens);
    const donor = this.donorFor(sequence, tokens, before);
    if (!donor) {
      this.claims.waiting(sequence, false);
      return undefined;
    }
    await donor.ready;
    // Its copy and its own tail now go into the next decode, as a prompt evaluated whole would.
    this.claims.waiting(sequence, false);
    if (sequence.disposed || donor.sequence.disposed) return undefined;
    if (this.queuedKvOps) {
      // What the donor's cells hold now: its decoded tokens (a donor freed meanwhile may hold less).
      const upTo = Math.min(cachedPrefix(donor.sequence, tokens), tokens.length - 1);
      if (upTo - before < this.minCopy) return undefined;
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

  /** Return a sequence. A sequence whose evaluation failed midway is wiped: its cache may not match its tokens. */
  async release(sequence: LlamaContextSequence, failed = false): Promise<void> {
    this.finished(sequence);
    this.claims.drop(sequence);
    this.batchLent.delete(sequence);
    this.yielding.delete(sequence);
    if (failed && !sequence.disposed) {
      try {
        await sequence.clearHistory();
      } catch {
        // Still lent out below: the next request erases whatever does not match its prompt anyway.
      }
    }
    this.busy.set(sequence.context, (this.busy.get(sequence.context) ?? 1) - 1);
    this.pool.release(sequence);
    if (this.pool.available === this.sequences.length) this.onIdle?.();
  }

  /**
   * One short generation on every context, its cache cleared after: the first decode of a context allocates
   * its compute buffers, so the first batch does not pay for them (llama-server warms up at start the same
   * way). Measured without it: a first 128-request batch took 1.64 s, later ones 1.09-1.22; with it 1.59 s
   * against 1.37, so most of a first batch's extra time is elsewhere (JIT), and this part is within noise.
   */
  async warmUp(tokens: readonly Token[]): Promise<void> {
    if (tokens.length === 0) return;
    await Promise.all(
      this.contexts.map(async (context) => {
        const sequence = this.sequences.find((s) => s.context === context)!;
        let generated = 0;
        for await (const _ of sequence.evaluate([...tokens], { temperature: 0, evaluationPriority: this.batchTag(sequence) })) {
          if (++generated >= 4) break;
        }
        this.finished(sequence);
        await sequence.clearHistory();
      }),
    );
  }

  async close(): Promise<void> {
    this.pool.close();
    await Promise.all(this.contexts.map((c) => c.dispose()));
  }

  /**
   * The free sequence sharing the longest prefix with the prompt; on a tie, the one on the least busy context
   * (so the contexts share the work), then the most recently released.
   */
  private pick(free: readonly LlamaContextSequence[], tokens: readonly Token[], memo: WeakMap<object, number>): number {
    let best = free.length - 1;
    let bestKey = [-1, 0];
    // What each context could give by a copy: families go where their prefix already is.
    const donors = new Map<LlamaContext, number>();
    for (let i = free.length - 1; i >= 0; i--) {
      const context = free[i].context;
      if (!donors.has(context)) donors.set(context, this.viaCopy(context, tokens, memo));
      const reach = this.reach(free[i], tokens, donors.get(context) ?? 0);
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
