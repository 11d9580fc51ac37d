// One batch request body -> engine call -> the OpenAI response body of its endpoint.
import { randomBytes } from "node:crypto";
import { EngineRequestError, type Engine, type GenerationResult } from "../engine/types.js";
import {
  chatCall,
  ChatBodySchema,
  completionCall,
  CompletionBodySchema,
  describeIssue,
  embeddingCall,
  EmbeddingBodySchema,
} from "./batch-line.js";
import type { Endpoint, TokenUsage } from "./types.js";
import { emptyUsage } from "./usage.js";
import type { z } from "zod";

export interface EndpointResult {
  body: Record<string, unknown>;
  usage: TokenUsage;
}

/**
 * Runs one request. A body that fails its schema (a file that skipped validation) throws a
 * non-retryable EngineRequestError with code "invalid_request"; engine errors propagate as they are.
 */
export async function executeRequest(engine: Engine, url: Endpoint, body: unknown, signal?: AbortSignal): Promise<EndpointResult> {
  switch (url) {
    case "/v1/chat/completions":
      return chatCompletion(engine, parse(ChatBodySchema, body), signal);
    case "/v1/completions":
      return textCompletion(engine, parse(CompletionBodySchema, body), signal);
    case "/v1/embeddings":
      return embeddings(engine, parse(EmbeddingBodySchema, body), signal);
    default:
      throw new EngineRequestError(`Unsupported endpoint '${String(url)}'.`, "invalid_url", false);
  }
}

/** Thrown for a request body that does not parse; `param` names the offending field. */
export class InvalidBodyError extends EngineRequestError {
  constructor(
    message: string,
    readonly param: string | null,
  ) {
    super(message, "invalid_request", false);
    this.name = "InvalidBodyError";
  }
}

function parse<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const { message, param } = describeIssue(r.error, body);
  throw new InvalidBodyError(message, param);
}

export const hexId = (bytes = 12) => randomBytes(bytes).toString("hex");
const now = () => Math.floor(Date.now() / 1000);
const modelOf = (engine: Engine, body: { model?: string | null }) => body.model ?? engine.info.modelId;

async function chatCompletion(engine: Engine, body: z.infer<typeof ChatBodySchema>, signal?: AbortSignal): Promise<EndpointResult> {
  const { messages, params } = chatCall(body);
  const r = await engine.chat(messages, params, signal);
  return {
    body: {
      id: `chatcmpl-${hexId()}`,
      object: "chat.completion",
      created: now(),
      model: modelOf(engine, body),
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: r.text, refusal: null },
          logprobs: null,
          finish_reason: r.finishReason,
        },
      ],
      usage: {
        ...usageBody(r.promptTokens, r.completionTokens),
        prompt_tokens_details: { cached_tokens: r.cachedPromptTokens },
        completion_tokens_details: { reasoning_tokens: 0 },
      },
    },
    usage: { promptTokens: r.promptTokens, completionTokens: r.completionTokens, cachedTokens: r.cachedPromptTokens },
  };
}

/** An array prompt runs prompt by prompt (one sequence per request keeps the concurrency bound honest). */
async function textCompletion(engine: Engine, body: z.infer<typeof CompletionBodySchema>, signal?: AbortSignal): Promise<EndpointResult> {
  const { prompts, params, echo } = completionCall(body);
  const results: GenerationResult[] = [];
  for (const prompt of prompts) {
    signal?.throwIfAborted();
    results.push(await engine.complete(prompt, params, signal));
  }
  const usage = results.reduce<TokenUsage>(
    (u, r) => ({
      promptTokens: u.promptTokens + r.promptTokens,
      completionTokens: u.completionTokens + r.completionTokens,
      cachedTokens: u.cachedTokens + r.cachedPromptTokens,
    }),
    emptyUsage(),
  );
  return {
    body: {
      id: `cmpl-${hexId()}`,
      object: "text_completion",
      created: now(),
      model: modelOf(engine, body),
      choices: results.map((r, index) => ({
        text: echo ? prompts[index] + r.text : r.text,
        index,
        logprobs: null,
        finish_reason: r.finishReason,
      })),
      usage: usageBody(usage.promptTokens, usage.completionTokens),
    },
    usage,
  };
}

async function embeddings(engine: Engine, body: z.infer<typeof EmbeddingBodySchema>, signal?: AbortSignal): Promise<EndpointResult> {
  const { inputs, encodingFormat, dimensions } = embeddingCall(body);
  const native = engine.info.embeddingDimensions;
  // Truncating a model that was not trained for it (Matryoshka) gives poor vectors, so only the native size is served.
  if (dimensions !== undefined && dimensions !== native) {
    throw new InvalidBodyError(
      `This model produces ${native}-dimensional embeddings; 'dimensions' must be ${native} or omitted.`,
      "dimensions",
    );
  }
  const r = await engine.embed(inputs, signal);
  return {
    body: {
      object: "list",
      data: r.embeddings.map((vector, index) => ({
        object: "embedding",
        index,
        embedding: encodingFormat === "base64" ? float32Base64(vector) : vector,
      })),
      model: modelOf(engine, body),
      usage: { prompt_tokens: r.promptTokens, total_tokens: r.promptTokens },
    },
    usage: { promptTokens: r.promptTokens, completionTokens: 0, cachedTokens: 0 },
  };
}

const usageBody = (prompt: number, completion: number) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
});

/** OpenAI's base64 embeddings: the float32 values, little-endian, base64-encoded. */
export function float32Base64(vector: readonly number[]): string {
  const buf = Buffer.allocUnsafe(vector.length * 4);
  for (const [i, v] of vector.entries()) buf.writeFloatLE(v, i * 4);
  return buf.toString("base64");
}
