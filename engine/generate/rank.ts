// Ranking (a query and a document scored by a reranker's classification head) over a pool of node-llama-cpp ranking
// contexts: one evaluates one pair at a time, so pairs run side by side on several. Only a model with a head
// (`cls.weight` or `cls.output.weight`, as node-llama-cpp's supportsRanking finds it) can rank.
import type { LlamaModel, LlamaRankingContext } from "node-llama-cpp";
import { asEngineError, contextLengthExceeded, throwIfAborted } from "../errors.js";
import { ResourcePool } from "../pool/pool.js";
import type { Borrower, RankResult } from "../types.js";

export class Ranker {
  private readonly pool: ResourcePool<LlamaRankingContext>;

  private constructor(
    private readonly contexts: LlamaRankingContext[],
    readonly contextSize: number,
  ) {
    this.pool = new ResourcePool(contexts);
  }

  /** Null when the model has no classification head. */
  static async create(model: LlamaModel, opts: { contexts: number; contextSize: number; threads: number }): Promise<Ranker | null> {
    if (!model.fileInsights.supportsRanking) return null;
    const contexts: LlamaRankingContext[] = [];
    try {
      for (let i = 0; i < Math.max(1, Math.floor(opts.contexts)); i++)
        contexts.push(
          await model.createRankingContext({ contextSize: opts.contextSize, batchSize: opts.contextSize, threads: opts.threads }),
        );
    } catch (err) {
      await Promise.all(contexts.map((c) => c.dispose()));
      throw err;
    }
    return new Ranker(contexts, opts.contextSize);
  }

  async rank(
    pairs: ReadonlyArray<readonly [string, string]>,
    param: string,
    borrower: Borrower,
    signal?: AbortSignal,
  ): Promise<RankResult> {
    const lengths = pairs.map(([query, document], i) => {
      const n = this.contexts[0].calculateInputLength(query, document);
      // node-llama-cpp needs one cell to spare.
      if (n >= this.contextSize)
        throw contextLengthExceeded(n, this.contextSize - 1, `pair of the query and ${param}[${i}]`, `${param}[${i}]`);
      return n;
    });
    throwIfAborted(signal);
    // A line's pairs spread over the contexts, at most one waiting for each: a line of 2,048 documents holds no
    // more of the pool, nor of its signal's listeners, than a line of two.
    const scores: number[] = pairs.map(() => 0);
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < pairs.length; i = next++) scores[i] = await this.rankOne(pairs[i][0], pairs[i][1], borrower, signal);
    };
    await Promise.all(Array.from({ length: Math.min(this.contexts.length, pairs.length) }, worker));
    return { scores, promptTokens: lengths.reduce((a, b) => a + b, 0) };
  }

  private rankOne(query: string, document: string, borrower: Borrower, signal?: AbortSignal): Promise<number> {
    return this.pool.use(borrower, signal, (context) => context.rank(query, document), asEngineError);
  }

  async close(): Promise<void> {
    this.pool.close();
    await Promise.all(this.contexts.map((c) => c.dispose()));
  }
}
