// The Engine over node-llama-cpp: one model, one generation context of N sequences, a few embedding contexts.
import type { Llama, LlamaModel } from "node-llama-cpp";
import { renderChat, type ChatFormat } from "./chat.js";
import type { Embedder } from "./embed.js";
import { engineClosed } from "./errors.js";
import { generate, resolveSampling, type GenerationRequest } from "./generate.js";
import type { SamplerMemory } from "./sampler-memory.js";
import type { SequencePool } from "./sequence-pool.js";
import { tokenizePrompt } from "./tokens.js";
import {
  EngineRequestError,
  type ChatMessage,
  type EmbeddingResult,
  type Engine,
  type EngineInfo,
  type GenerationResult,
  type SamplingParams,
} from "./types.js";

/** OpenAI's default max_tokens for /v1/completions. */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;

export interface LlamaEngineParts {
  llama: Llama;
  model: LlamaModel;
  pool: SequencePool;
  /** Null when the model cannot embed (see createEngine). */
  embedder: Embedder | null;
  chatFormat: ChatFormat;
  /** Counts the native sampler memory each request leaves for the collector (sampler-memory.ts). */
  samplerMemory: SamplerMemory;
  info: EngineInfo;
}

export class LlamaEngine implements Engine {
  readonly info: EngineInfo;
  private closing: Promise<void> | null = null;

  constructor(private readonly parts: LlamaEngineParts) {
    this.info = Object.freeze({ ...parts.info });
  }

  async complete(prompt: string, params: SamplingParams = {}, signal?: AbortSignal): Promise<GenerationResult> {
    this.ensureOpen();
    if (typeof prompt !== "string") throw new EngineRequestError("prompt must be a string.", "invalid_request", false);
    const sampling = resolveSampling(params, DEFAULT_COMPLETION_MAX_TOKENS);
    const tokens = tokenizePrompt(this.parts.model, prompt);
    return this.generate({ ...sampling, tokens, stopTokens: new Set() }, signal);
  }

  /** Without maxTokens the answer may fill the rest of the sequence's context, which bounds it. */
  async chat(messages: ChatMessage[], params: SamplingParams = {}, signal?: AbortSignal): Promise<GenerationResult> {
    this.ensureOpen();
    const sampling = resolveSampling(params, null);
    const rendered = renderChat(this.parts.model, this.parts.chatFormat, messages);
    return this.generate(
      {
        ...sampling,
        tokens: rendered.tokens,
        stopStrings: [...sampling.stopStrings, ...rendered.stopStrings],
        stopTokens: rendered.stopTokens,
      },
      signal,
    );
  }

  private async generate(req: GenerationRequest, signal?: AbortSignal): Promise<GenerationResult> {
    try {
      return await generate(this.parts.pool, this.parts.model, req, signal);
    } finally {
      this.parts.samplerMemory.released();
    }
  }

  async embed(inputs: string[], signal?: AbortSignal): Promise<EmbeddingResult> {
    this.ensureOpen();
    if (!this.parts.embedder) {
      throw new EngineRequestError(`The model ${this.info.modelId} cannot compute embeddings.`, "embeddings_unsupported", false);
    }
    return this.parts.embedder.embed(inputs, signal);
  }

  /** Tokens of `text` as a completion prompt, beginning-of-sequence token included: what promptTokens reports. */
  countTokens(text: string): number {
    this.ensureOpen();
    return tokenizePrompt(this.parts.model, text).length;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      const { pool, embedder, model, llama } = this.parts;
      await Promise.allSettled([pool.close(), embedder?.close()]);
      await model.dispose();
      await llama.dispose();
    })();
    return this.closing;
  }

  private ensureOpen() {
    if (this.closing) throw engineClosed();
  }
}
