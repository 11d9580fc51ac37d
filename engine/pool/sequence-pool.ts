// Generation contexts with N sequences in all, lent to requests one sequence each: the contexts are made by
// generation-contexts.ts, a sequence chosen by sequence-choice.ts and made ready by prefix-copy.ts (with its context
// paused on the prebuilt build, context-pause.ts); here, the lending,
// the interactive lane's preemption of batch lines, and the batch order's tags.
// node-llama-cpp gathers the pending tokens of all sequences of a context into one decode per step,
// so the requests in flight on a context are decoded together (continuous batching) without any work here.
// Several contexts decode at the same time, each on its own thread(s): on a CPU that is how every core
// computes without ggml's per-node barrier between threads (docs/performance.md, the engine's defaults).
import type { EvaluationPriority, LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import type { Borrower } from "../types.js";
import { type BatchOrder, sequenceTag } from "./batch-order.js";
import { ContextPauses } from "./context-pause.js";
import { createGenerationContexts, type GenerationContextOptions } from "./generation-contexts.js";
import { canQueueKvOps } from "./kv-ops.js";
import { ResourcePool } from "./pool.js";
import { copyPrefix, type Locked, reusePrefix } from "./prefix-copy.js";
import { type CacheScope, canCopyState, MIN_COPY_TOKENS, MIN_QUEUED_COPY_TOKENS } from "./prefix-share.js";
import { SequenceChoice } from "./sequence-choice.js";

export interface SequencePoolOptions extends GenerationContextOptions {
  /** Told when no sequence is lent any more. */
  onIdle?: () => void;
  /** Reuse a sequence's cached prefix (default); off only to measure what reuse gains. */
  prefixReuse?: boolean;
  /** Copy a prefix another sequence of the context holds (prefix-share.ts; default on where the library can). */
  prefixCopy?: boolean;
}

/**
 * Sequences kept free for the interactive lane while it is warm (pool.ts): one in sixteen, at least one, as
 * llama-server fed at its slots minus one keeps one, and at most four, the most measured. They are the sequences the
 * lane gave back last, so they hold its recent prompts: beside a full batch of 64 sequences, four kept the prompts of
 * five families of requests a second apart, and most requests evaluated only their own tail, where with one nearly
 * every request evaluated its whole prompt (docs/performance.md). With fewer than four sequences the batches would
 * give up too much of the engine.
 */
export const interactiveReserve = (sequences: number): number =>
  sequences >= 4 ? Math.min(4, Math.max(1, Math.floor(sequences / 16))) : 0;
/**
 * Sequences the interactive lane leaves batch work, however many of its requests come (pool.ts): a quarter, at least
 * one of two or more. Requests that would fill the machine otherwise took every sequence, and a batch beside
 * them finished no line (docs/performance.md, the lanes at the qwen2.5-0.5b size).
 */
export const batchFloor = (sequences: number): number => (sequences >= 2 ? Math.max(1, Math.floor(sequences / 4)) : 0);

export class SequencePool {
  private readonly pool: ResourcePool<LlamaContextSequence>;
  private readonly tags = new Map<LlamaContextSequence, EvaluationPriority>();
  private readonly orderOf = new Map<LlamaContextSequence, BatchOrder>();
  private readonly choice: SequenceChoice;
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
  private readonly pauses = new ContextPauses();
  private lends = 0;

  private constructor(
    readonly contexts: readonly LlamaContext[],
    private readonly orders: readonly BatchOrder[],
    private readonly sequences: LlamaContextSequence[],
    private readonly requestedContextSize: number,
    private readonly prefixReuse: boolean,
    prefixCopy: boolean,
    kvUnified: boolean,
    private readonly onIdle?: () => void,
  ) {
    this.kvUnified = kvUnified;
    this.pool = new ResourcePool(sequences, { reserve: interactiveReserve(sequences.length), batchFloor: batchFloor(sequences.length) });
    this.queuedKvOps = canQueueKvOps(sequences[0]);
    this.prefixCopy = prefixReuse && prefixCopy && sequences.length > 1 && (this.queuedKvOps || canCopyState(sequences[0]));
    this.minCopy = this.queuedKvOps ? MIN_QUEUED_COPY_TOKENS : MIN_COPY_TOKENS;
    this.choice = new SequenceChoice(contexts, sequences, this.prefixCopy, this.minCopy);
    contexts.forEach((context, c) => {
      for (const [i, s] of this.choice.siblingsOf(context).entries()) {
        this.tags.set(s, sequenceTag(i));
        this.orderOf.set(s, orders[c]);
      }
    });
  }

  static async create(model: LlamaModel, opts: SequencePoolOptions): Promise<SequencePool> {
    const { contexts, orders, sequences } = await createGenerationContexts(model, opts);
    return new SequencePool(
      contexts,
      orders,
      sequences,
      opts.contextSize,
      opts.prefixReuse ?? true,
      opts.prefixCopy ?? true,
      opts.kvUnified ?? false,
      opts.onIdle,
    );
  }

  get size(): number {
    return this.sequences.length;
  }

  /** How full the decodes have been (batch-order.ts): steps, sequences in them, turns spent waiting, passes. */
  get batchStats(): Readonly<BatchOrder["stats"]> {
    const sum = { steps: 0, sequences: 0, tokens: 0, waitTurns: 0, microBatches: 0 };
    for (const order of this.orders) for (const k of Object.keys(sum) as (keyof typeof sum)[]) sum[k] += order.stats[k];
    return sum;
  }

  /**
   * Tokens a sequence may hold: the size asked for. node-llama-cpp rounds a context's cells up to a multiple of 256
   * where the model's training context allows (64 asked, 256 made); the rest is never filled, so the setting is what
   * a prompt and its answer get.
   */
  get contextSize(): number {
    return Math.min(this.requestedContextSize, this.contexts[0].contextSize);
  }

  /**
   * Lend `borrower` a sequence, in its lane, for a prompt of `tokens`. With several free, the one whose cached tokens
   * share the longest prefix with the prompt is taken, so repeated system prompts and few-shot headers are
   * evaluated once; with none free, a released sequence goes to the waiting request it shares most with.
   */
  async acquire(tokens: readonly Token[], borrower: Borrower, signal?: AbortSignal, resumed = false): Promise<LlamaContextSequence> {
    const memo = new WeakMap<object, number>();
    const scope = borrower.cacheScope;
    const sequence = await this.pool.acquire(borrower, signal, {
      choose: (free) => {
        const index = this.choice.pick(free, this.prefixReuse ? tokens : [], scope, memo);
        // Claimed at once, so a request picking right after this one sees this prompt coming on this context.
        if (this.prefixCopy) this.choice.claim(free[index], tokens, scope);
        return index;
      },
      // A busy batch waits for sequences: a freed one goes to the waiting prompt that shares most with its cache,
      // or with what its context's other sequences hold (a copy away).
      affinity: this.prefixReuse && tokens.length > 0 ? (s) => this.choice.affinity(s, tokens, scope, memo) : undefined,
      resumed,
    });
    if (this.prefixCopy && !this.choice.claims.isClaimed(sequence)) this.choice.claim(sequence, tokens, scope);
    this.choice.load(sequence, 1);
    if (borrower.lane === "batch") this.batchLent.set(sequence, { at: this.lends++, generating: false });
    else this.orderOf.get(sequence)?.urge(this.batchTag(sequence), true);
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
  async resume(
    sequence: LlamaContextSequence,
    tokens: readonly Token[],
    borrower: Borrower,
    signal?: AbortSignal,
  ): Promise<LlamaContextSequence> {
    // Waiting before the sequence goes back: should the lane have reached its cap while this line was yielding, the
    // sequence comes back to this line (a resumed line waits ahead of the batch), not to a request past the cap.
    const next = this.acquire(tokens, borrower, signal, true);
    next.catch(() => undefined);
    await this.release(sequence);
    return next;
  }

  /** A resumed line evaluated these tokens again (its cache went to the interactive request). */
  reevaluated(tokens: number): void {
    this.yieldStats.tokens += tokens;
  }

  /** The sequence's prompt has been evaluated (its first token came): others may copy it now. */
  evaluated(sequence: LlamaContextSequence): void {
    this.choice.claims.evaluated(sequence);
    this.orderOf.get(sequence)?.urge(this.batchTag(sequence), false);
    const lent = this.batchLent.get(sequence);
    if (lent) lent.generating = true;
  }

  /**
   * The sequence's generation is over: decoding stops waiting for its next token (batch-order.ts). Unless a request
   * waits for a sequence: this one goes to it on release, and the next decode waits (a few turns) for that
   * request's prompt; otherwise the decode would go on with a gap at this sequence, one more pass over the weights
   * (micro-batches.ts), and the prompt would come a decode later.
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
   * Make a lent sequence ready for `tokens` of `scope` (Borrower.cacheScope); returns how many leading tokens need no
   * evaluation. When another sequence of the context holds (or is evaluating) a longer prefix of them for the same
   * scope, that prefix is copied from it. A cache that holds another scope's prompt is emptied. On the prebuilt build
   * the copy and the cut pause the context's other sequences (`locked`).
   */
  async prepare(sequence: LlamaContextSequence, tokens: readonly Token[], scope: CacheScope): Promise<number> {
    const locked = this.locked(sequence);
    const copied = this.prefixCopy ? await copyPrefix(this.choice, sequence, tokens, scope, this.queuedKvOps, locked) : undefined;
    // Whose cache it is needs no comparison of tokens: reusePrefix compares them once.
    const mine = this.prefixReuse && this.choice.claims.holds(sequence, scope);
    const keep = await reusePrefix(sequence, mine ? tokens : [], this.queuedKvOps, locked);
    this.choice.claims.hold(sequence, scope);
    if (copied && keep > copied.before) {
      this.copyStats.copies++;
      this.copyStats.tokens += keep - copied.before;
    }
    return keep;
  }

  /**
   * Resolves when `sequence` may queue its next token: at once (undefined) unless a copy or cut on another of its
   * context's sequences waits for the context's lock (`locked`). A generating sequence awaits it between tokens
   * (generate.ts).
   */
  hold(sequence: LlamaContextSequence): Promise<void> | undefined {
    return this.pauses.hold(sequence.context);
  }

  /**
   * A copy or a cut on the prebuilt build takes the context's lock: it runs with the context paused
   * (context-pause.ts), so it does not wait for the lines generating there to end. That holds the batch for about a
   * decode at each line's start, where waiting left each new line's sequence idle until the context's lines all
   * ended: prebuilt, 256 varied lines ran in 70 s against 77-96 s, families-8 in 14.5 s against 21 s (copies came in
   * time), uniform lines the same (bench/engine-cli.ts, 4 contexts of 16 sequences).
   */
  private locked(sequence: LlamaContextSequence): Locked {
    return (change) => this.pauses.during(sequence.context, change);
  }

  /**
   * Make a lent sequence ready to evaluate its prompt whole, every position's logits read (a scored prompt,
   * prompt-logprobs.ts): its cache is emptied and nothing is copied, since no cached position has logits left.
   */
  async prepareWhole(sequence: LlamaContextSequence, scope: CacheScope): Promise<void> {
    await reusePrefix(sequence, [], this.queuedKvOps, this.locked(sequence));
    this.choice.claims.hold(sequence, scope);
  }

  /** Return a sequence. A sequence whose evaluation failed midway is wiped: its cache may not match its tokens. */
  async release(sequence: LlamaContextSequence, failed = false): Promise<void> {
    this.finished(sequence);
    this.orderOf.get(sequence)?.urge(this.batchTag(sequence), false);
    this.choice.claims.drop(sequence);
    const lane = this.batchLent.has(sequence) ? "batch" : "interactive";
    this.batchLent.delete(sequence);
    this.yielding.delete(sequence);
    if (failed && !sequence.disposed) {
      try {
        await this.locked(sequence)(() => sequence.clearHistory());
      } catch {
        // Still lent out below: the next request erases whatever does not match its prompt anyway.
      }
    }
    this.choice.load(sequence, -1);
    this.pool.release(sequence, failed ? "batch" : lane);
    if (this.pool.available === this.sequences.length) this.onIdle?.();
  }

  /**
   * One short generation on every context, its cache cleared after: the first decode of a context allocates
   * its compute buffers, so the first batch does not pay for them (llama-server warms up at start the same
   * way).
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
}
