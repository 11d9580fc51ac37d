// One LlamaContext with N sequences, lent to requests one sequence each.
// node-llama-cpp gathers the pending tokens of all sequences of a context into one decode per step,
// so N requests in flight are decoded together (continuous batching) without any work here.
import {
  InsufficientMemoryError,
  type EvaluationPriority,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { BatchOrder, sequenceTag } from "./batch-order.js";
import { ResourcePool } from "./pool.js";
import type { EngineOptions } from "./types.js";

type Log = NonNullable<EngineOptions["log"]>;

export interface SequencePoolOptions {
  /** Sequences wanted; when `auto`, fewer are taken if memory is short. */
  sequences: number;
  auto: boolean;
  contextSize: number;
  /** A fixed count, or a range node-llama-cpp's thread splitter allots per decode (step-threads.ts). */
  threads: number | { ideal: number; min: number };
  /** Told each step's token count before it is decoded, and when no sequence is lent any more. */
  onStep?: (tokens: number) => void;
  onIdle?: () => void;
  /** See createEngine: off on CPU, where it is slower for small heads. */
  flashAttention: boolean | "auto";
  /** Reuse a sequence's cached prefix (default); off only to measure what reuse gains. */
  prefixReuse?: boolean;
  log: Log;
}

export class SequencePool {
  private readonly pool: ResourcePool<LlamaContextSequence>;
  private readonly tags: Map<LlamaContextSequence, EvaluationPriority>;

  private constructor(
    readonly context: LlamaContext,
    private readonly sequences: LlamaContextSequence[],
    private readonly prefixReuse: boolean,
    private readonly order: BatchOrder,
    private readonly onIdle?: () => void,
  ) {
    this.pool = new ResourcePool(sequences);
    this.tags = new Map(sequences.map((s, i) => [s, sequenceTag(i)]));
  }

  static async create(model: LlamaModel, opts: SequencePoolOptions): Promise<SequencePool> {
    let sequences = Math.max(1, Math.floor(opts.sequences));
    for (;;) {
      const order = new BatchOrder(opts.onStep);
      try {
        const context = await model.createContext({
          sequences,
          contextSize: opts.contextSize,
          threads: opts.threads,
          flashAttention: opts.flashAttention,
          failedCreationRemedy: false,
          batching: { itemPrioritizationStrategy: order.strategy },
        });
        const all = Array.from({ length: sequences }, () => context.getSequence());
        return new SequencePool(context, all, opts.prefixReuse ?? true, order, opts.onIdle);
      } catch (err) {
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

  /** How full the decodes have been (batch-order.ts): steps, sequences in them, turns spent waiting. */
  get batchStats(): Readonly<BatchOrder["stats"]> {
    return this.order.stats;
  }

  /** Tokens each sequence holds (llama.cpp may round the requested size up). */
  get contextSize(): number {
    return this.context.contextSize;
  }

  /**
   * Lend a sequence for a request whose prompt is `tokens`. With several free, the one whose cached tokens
   * share the longest prefix with the prompt is taken, so repeated system prompts and few-shot headers are
   * evaluated once.
   */
  acquire(tokens: readonly Token[], signal?: AbortSignal): Promise<LlamaContextSequence> {
    return this.pool.acquire(signal, this.prefixReuse ? (free) => longestPrefix(free, tokens) : undefined);
  }

  /** The sequence's generation is over: decoding stops waiting for its next token (batch-order.ts). */
  finished(sequence: LlamaContextSequence): void {
    this.order.leave(this.batchTag(sequence));
  }

  /** Pass as `evaluationPriority` with every evaluation of `sequence`: it orders the batch (batch-order.ts). */
  batchTag(sequence: LlamaContextSequence): EvaluationPriority {
    return this.tags.get(sequence) ?? sequenceTag(0);
  }

  /** Make a lent sequence ready for `tokens`; returns how many leading tokens need no evaluation. */
  prepare(sequence: LlamaContextSequence, tokens: readonly Token[]): Promise<number> {
    return reusePrefix(sequence, this.prefixReuse ? tokens : []);
  }

  /** Return a sequence. A sequence whose evaluation failed midway is wiped: its cache may not match its tokens. */
  async release(sequence: LlamaContextSequence, failed = false): Promise<void> {
    this.finished(sequence);
    if (failed && !sequence.disposed) {
      try {
        await sequence.clearHistory();
      } catch {
        // Still lent out below: the next request erases whatever does not match its prompt anyway.
      }
    }
    this.pool.release(sequence);
    if (this.pool.available === this.sequences.length) this.onIdle?.();
  }

  async close(): Promise<void> {
    this.pool.close();
    await this.context.dispose();
  }
}

function longestPrefix(free: readonly LlamaContextSequence[], tokens: readonly Token[]): number {
  let best = free.length - 1;
  let bestLength = -1;
  // From the end: on a tie the most recently released sequence wins.
  for (let i = free.length - 1; i >= 0; i--) {
    const length = free[i].compareContextTokens(tokens as Token[]).firstDifferentIndex;
    if (length > bestLength) {
      best = i;
      bestLength = length;
    }
  }
  return best;
}

/**
 * Align the sequence's cache with `tokens` and say how many leading tokens need no evaluation.
 * At least the last prompt token is always evaluated, since its logits give the first new token.
 */
export async function reusePrefix(sequence: LlamaContextSequence, tokens: readonly Token[]): Promise<number> {
  const shared = tokens.length === 0 ? 0 : sequence.compareContextTokens(tokens as Token[]).firstDifferentIndex;
  const keep = Math.max(0, Math.min(shared, tokens.length - 1));
  if (keep < sequence.nextTokenIndex) {
    await sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]);
  }
  return keep;
}
