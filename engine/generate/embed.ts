// Embeddings over a pool of embedding contexts. node-llama-cpp evaluates one input at a time inside an
// embedding context, so parallel inputs need several contexts.
import type { LlamaEmbeddingContext, LlamaModel, Token } from "node-llama-cpp";
import { asEngineError, contextLengthExceeded, invalidRequest, throwIfAborted } from "../errors.js";
import { ResourcePool } from "../pool/pool.js";
import type { Borrower, EmbeddingResult } from "../types.js";
import { withBos } from "./tokens.js";

export interface EmbedderOptions {
  contexts: number;
  contextSize: number;
  threads: number;
}

export class Embedder {
  private readonly pool: ResourcePool<LlamaEmbeddingContext>;

  private constructor(
    private readonly model: LlamaModel,
    private readonly contexts: LlamaEmbeddingContext[],
    readonly contextSize: number,
  ) {
    this.pool = new ResourcePool(contexts);
  }

  static async create(model: LlamaModel, opts: EmbedderOptions): Promise<Embedder> {
    const count = Math.max(1, Math.floor(opts.contexts));
    const contexts: LlamaEmbeddingContext[] = [];
    try {
      for (let i = 0; i < count; i++) {
        // The whole input is one batch, so the batch is as large as the context.
        contexts.push(
          await model.createEmbeddingContext({ contextSize: opts.contextSize, batchSize: opts.contextSize, threads: opts.threads }),
        );
      }
    } catch (err) {
      await Promise.all(contexts.map((c) => c.dispose()));
      throw err;
    }
    return new Embedder(model, contexts, opts.contextSize);
  }

  /** The model's tokens for an embedding input (beginning/end tokens added as the model wants). */
  private tokensOf(input: string): Token[] {
    const tokens = withBos(this.model, this.model.tokenize(input, false));
    const { eos, shouldAppendEosToken } = this.model.tokens;
    if (shouldAppendEosToken && eos != null && tokens.at(-1) !== eos) tokens.push(eos);
    return tokens;
  }

  async embed(inputs: readonly string[], borrower: Borrower, signal?: AbortSignal): Promise<EmbeddingResult> {
    if (!Array.isArray(inputs) || inputs.length === 0) throw invalidRequest("input must be a non-empty list of strings.");
    const tokenized = inputs.map((input, i) => {
      if (typeof input !== "string" || input === "") throw invalidRequest(`input[${i}] must be a non-empty string.`);
      const tokens = this.tokensOf(input);
      // node-llama-cpp needs one cell to spare.
      if (tokens.length >= this.contextSize) throw contextLengthExceeded(tokens.length, this.contextSize - 1, `input[${i}]`);
      return tokens;
    });
    throwIfAborted(signal);
    // A line's inputs spread over the contexts, at most one waiting for each: a line of 2,048 inputs holds no more
    // of the pool, nor of its signal's listeners, than a line of two, and a line behind it waits for one input.
    const embeddings: number[][] = tokenized.map(() => []);
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < tokenized.length; i = next++) embeddings[i] = await this.embedOne(tokenized[i], borrower, signal);
    };
    await Promise.all(Array.from({ length: Math.min(this.contexts.length, tokenized.length) }, worker));
    return { embeddings, promptTokens: tokenized.reduce((n, t) => n + t.length, 0) };
  }

  private embedOne(tokens: Token[], borrower: Borrower, signal?: AbortSignal): Promise<number[]> {
    return this.pool.use(borrower, signal, async (context) => normalize((await context.getEmbeddingFor(tokens)).vector), asEngineError);
  }

  async close(): Promise<void> {
    this.pool.close();
    await Promise.all(this.contexts.map((c) => c.dispose()));
  }
}

/** Unit length, as OpenAI's embeddings are (cosine similarity is then a dot product). */
export function normalize(vector: readonly number[]): number[] {
  const norm = Math.sqrt(vector.reduce((s, x) => s + x * x, 0));
  return norm > 0 ? vector.map((x) => x / norm) : [...vector];
}
