// The Engine over node-llama-cpp: one model, its generation contexts (up to four) of N sequences in all, a few
// embedding contexts.
import { type Llama, type LlamaModel, LlamaText, type Token } from "node-llama-cpp";
import type { RunShape } from "../openai/backend.js";
import { unsupportedParameter, unsupportedValue } from "../openai/errors.js";
import { cannotRank, engineClosed, invalidRequest } from "./errors.js";
import { type ChatFormat, renderChat } from "./generate/chat.js";
import type { Embedder } from "./generate/embed.js";
import { type GenerationRequest, generate, resolveSampling } from "./generate/generate.js";
import type { Grammars } from "./generate/grammars.js";
import type { Ranker } from "./generate/rank.js";
import type { SamplerMemory } from "./generate/sampler-memory.js";
import { tokenizePrompt, withBos } from "./generate/tokens.js";
import { generateWithTools } from "./generate/tool-calls.js";
import type { KvChoice } from "./pool/kv-choice.js";
import { adapterSource, type LoraPools } from "./pool/lora-pools.js";
import {
  BATCH_WORK,
  type Borrower,
  type ChatMessage,
  type EmbeddingResult,
  type Engine,
  type EngineInfo,
  type GenerationResult,
  type LoraAdapter,
  type RankResult,
  RequestError,
  type SamplingParams,
  type SchedulingStats,
  type ToolFunction,
} from "./types.js";

/** OpenAI's default max_tokens for /v1/completions. */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;

export interface LlamaEngineParts {
  llama: Llama;
  model: LlamaModel;
  /** The sequence pool, made again with the KV cache a run suits where KV_UNIFIED is auto (kv-choice.ts). */
  kv: Pick<KvChoice, "run" | "prepare" | "stats" | "switches" | "current" | "close">;
  /** The LoRA adapters' contexts (lora-pools.ts); absent on an adapter's view, whose model is the base engine's. */
  lora?: LoraPools;
  /** Null when the model cannot embed (see createEngine). */
  embedder: Embedder | null;
  /** Null when the model has no classification head (engine/generate/rank.ts). */
  ranker: Ranker | null;
  chatFormat: ChatFormat;
  /** Counts the native sampler memory each request leaves for the collector (sampler-memory.ts). */
  samplerMemory: SamplerMemory;
  grammars: Grammars;
  vocabularySize: number;
  info: EngineInfo;
}

export class LlamaEngine implements Engine {
  readonly info: EngineInfo;
  private closing: Promise<void> | null = null;

  constructor(private readonly parts: LlamaEngineParts) {
    this.info = Object.freeze({ ...parts.info });
  }

  async complete(
    prompt: string | readonly number[],
    params: SamplingParams = {},
    signal?: AbortSignal,
    borrower: Borrower = BATCH_WORK,
  ): Promise<GenerationResult> {
    this.ensureOpen();
    const { model } = this.parts;
    const text = typeof prompt === "string" ? model.tokenize(prompt, true) : null;
    const tokens = text ? withBos(model, [...text]) : this.checkedTokens(prompt as readonly number[]);
    // A beginning-of-sequence token the tokenizer added is not in the prompt's text.
    const added = text ? tokens.length - text.length : 0;
    return this.generate(
      tokens,
      params,
      DEFAULT_COMPLETION_MAX_TOKENS,
      { stopStrings: [], stopTokens: new Set(), added },
      signal,
      borrower,
    );
  }

  /** Without maxTokens the answer may fill the rest of the sequence's context, which bounds it. */
  async chat(
    messages: ChatMessage[],
    params: SamplingParams = {},
    signal?: AbortSignal,
    borrower: Borrower = BATCH_WORK,
  ): Promise<GenerationResult> {
    this.ensureOpen();
    const { model, chatFormat } = this.parts;
    const syntax = chatFormat.tools;
    const { tools, ...plain } = params;
    const calling = tools !== undefined && tools.choice !== "none";
    if (calling && !syntax) {
      throw unsupportedParameter("tools", "The model's chat template has no function-calling format, so it cannot call tools.");
    }
    // With tool_choice "none" the functions are still shown, as OpenAI does, where the template can show them.
    const rendered = renderChat(model, chatFormat, messages, syntax ? (tools?.functions ?? []) : []);
    if (!calling || !syntax) return this.generate(rendered.tokens, plain, null, rendered, signal, borrower);
    // A tool call is known only once the answer is whole: nothing is streamed while tools may be called, and the
    // answer's phases are several generations, whose prompts are not the request's.
    const { onText: _, onPrompt: __, ...quiet } = plain;
    return generateWithTools(model, syntax, rendered, { ...quiet, tools }, (tokens, p, stops) =>
      this.generate(tokens, p, null, stops, signal, borrower),
    );
  }

  get vocabularySize(): number {
    return this.parts.vocabularySize;
  }

  isEndOfGeneration(token: number): boolean {
    return this.parts.model.isEogToken(token as Token);
  }

  scheduling(): SchedulingStats {
    const stats = this.parts.kv.stats();
    return {
      steps: stats.steps,
      sequences: stats.sequences,
      evaluatedTokens: stats.tokens,
      microBatches: stats.microBatches,
      prefixCopies: stats.copies,
      copiedTokens: stats.copiedTokens,
      preemptions: stats.yields,
      reevaluatedTokens: stats.reevaluated,
      kvSwitches: this.parts.kv.switches.toUnified + this.parts.kv.switches.toStreams,
      kvUnified: this.parts.kv.current.kvUnified,
    };
  }

  withAdapter(adapter: LoraAdapter): LlamaEngine {
    this.ensureOpen();
    const { lora, kv, info } = this.parts;
    if (!lora) throw new Error("an adapter's view serves no other adapter");
    // Embeddings and ranking run on the base's own contexts, without the adapter: the view refuses them.
    return new LlamaEngine({
      ...this.parts,
      kv: adapterSource(lora, adapter, kv as KvChoice),
      lora: undefined,
      embedder: null,
      ranker: null,
      info: { ...info, modelId: adapter.name, embeddingDimensions: 0, ranking: false },
    });
  }

  /** Sets the KV cache up for a batch run of this shape (kv-choice.ts); waits for nothing else. */
  prepareRun(shape: RunShape): Promise<void> {
    this.ensureOpen();
    return this.parts.kv.prepare(shape);
  }

  private async grammarFor(format: NonNullable<SamplingParams["format"]>) {
    try {
      return await this.parts.grammars.get(format);
    } catch (err) {
      if (err instanceof RequestError) throw err;
      // A schema too big for the grammar generator's recursion: the client hears that, never the engine's own words.
      if (err instanceof RangeError) throw unsupportedValue("response_format", "The response format's schema is too large to be enforced.");
      // node-llama-cpp's own refusal of a schema it cannot turn into a grammar.
      const message = err instanceof Error ? err.message : String(err);
      throw unsupportedValue("response_format", `The response format cannot be enforced: ${message}`);
    }
  }

  private checkedTokens(prompt: readonly number[]): Token[] {
    const bad = prompt.findIndex((t) => !Number.isInteger(t) || t < 0 || t >= this.vocabularySize);
    if (bad >= 0) throw invalidRequest(`Token id ${prompt[bad]} is not in the model's vocabulary of ${this.vocabularySize} tokens.`);
    return prompt as Token[];
  }

  private async generate(
    tokens: Token[],
    params: SamplingParams,
    defaultMaxTokens: number | null,
    stops: { stopStrings: string[]; stopTokens: ReadonlySet<Token>; added?: number },
    signal: AbortSignal | undefined,
    borrower: Borrower,
  ): Promise<GenerationResult> {
    const sampling = resolveSampling(params, defaultMaxTokens);
    const grammar = params.format ? await this.grammarFor(params.format) : null;
    // A JSON grammar ends by allowing newlines only, and says which run of them ends the answer.
    const grammarStops = (grammar?.stopGenerationTriggers ?? []).map((t) => LlamaText(t).toString());
    const req: GenerationRequest = {
      ...sampling,
      tokens,
      grammar,
      stopStrings: [...sampling.stopStrings, ...stops.stopStrings, ...grammarStops],
      stopTokens: stops.stopTokens,
      trimTrailingWhitespace: grammar?.trimWhitespaceSuffix ?? false,
      onText: params.onText,
      onPrompt: params.onPrompt,
      addedTokens: stops.added ?? 0,
    };
    try {
      return await this.parts.kv.run((pool) => generate({ pool, model: this.parts.model, req, signal, borrower }));
    } finally {
      this.parts.samplerMemory.released();
    }
  }

  async embed(inputs: string[], signal?: AbortSignal, borrower: Borrower = BATCH_WORK): Promise<EmbeddingResult> {
    this.ensureOpen();
    if (!this.parts.embedder) {
      throw new RequestError(`The model ${this.info.modelId} cannot compute embeddings.`, "embeddings_unsupported", false);
    }
    return this.parts.embedder.embed(inputs, borrower, signal);
  }

  async rank(
    pairs: ReadonlyArray<readonly [string, string]>,
    param: string,
    signal?: AbortSignal,
    borrower: Borrower = BATCH_WORK,
  ): Promise<RankResult> {
    this.ensureOpen();
    if (!this.parts.ranker) throw cannotRank(this.info.modelId);
    return this.parts.ranker.rank(pairs, param, borrower, signal);
  }

  detokenize(tokens: readonly number[]): string {
    this.ensureOpen();
    return this.parts.model.detokenize(this.checkedTokens(tokens), true);
  }

  /** Tokens of `text` as a completion prompt, beginning-of-sequence token included: what promptTokens reports. */
  countTokens(text: string): number {
    this.ensureOpen();
    return tokenizePrompt(this.parts.model, text).length;
  }

  /** The tokens chat() would evaluate for these messages: the template rendered as it renders it, nothing run. */
  chatPromptTokens(messages: ChatMessage[], functions: readonly ToolFunction[] = []): number {
    this.ensureOpen();
    const { model, chatFormat } = this.parts;
    return renderChat(model, chatFormat, messages, chatFormat.tools ? functions : []).tokens.length;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      const { kv, embedder, ranker, model, llama, lora } = this.parts;
      // An adapter's view owns nothing: the base's engine closes the adapters' contexts and the model.
      if (!lora) return;
      this.parts.samplerMemory.close();
      await Promise.allSettled([kv.close(), embedder?.close(), ranker?.close(), lora.close()]);
      await model.dispose();
      await llama.dispose();
    })();
    return this.closing;
  }

  private ensureOpen() {
    if (this.closing) throw engineClosed();
  }
}
