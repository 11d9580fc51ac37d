// The generation loop shared by completions and chat: one sequence, one prompt, token by token.
// A direct sequence.evaluate loop rather than LlamaCompletion: it measured as fast or faster for many short
// parallel requests (engine/README.md), counts real tokens, never truncates or shifts the prompt behind our
// back, and keeps the sequence's cache for the next request's shared prefix.
import { randomInt } from "node:crypto";
import type { LlamaModel, Token } from "node-llama-cpp";
import { abortError, asEngineError, contextLengthExceeded, invalidRequest, throwIfAborted } from "./errors.js";
import type { SequencePool } from "./sequence-pool.js";
import { findStop } from "./stops.js";
import type { FinishReason, GenerationResult, SamplingParams } from "./types.js";

export interface GenerationRequest {
  /** The whole prompt, beginning-of-sequence token included. */
  tokens: Token[];
  /** Most tokens to generate; null: as many as the context has room for. */
  maxTokens: number | null;
  temperature: number;
  topP: number;
  seed: number;
  stopStrings: string[];
  /** Tokens that end the answer besides the model's end-of-generation tokens (e.g. a chat turn's end marker). */
  stopTokens: ReadonlySet<Token>;
}

/** A detokenized piece ending in this is an incomplete UTF-8 character: wait for the next byte token. */
const REPLACEMENT_CHAR = "\uFFFD";
const MAX_PARTIAL_TOKENS = 4;

/** Sampling parameters checked and defaulted as the OpenAI API does (temperature 1, top_p 1). */
export function resolveSampling(params: SamplingParams, defaultMaxTokens: number | null) {
  const { maxTokens, temperature = 1, topP = 1, stop = [], seed } = params;
  if (maxTokens != null && (!Number.isInteger(maxTokens) || maxTokens < 0)) {
    throw invalidRequest(`maxTokens must be a non-negative integer, got ${maxTokens}.`);
  }
  if (!Number.isFinite(temperature) || temperature < 0) throw invalidRequest(`temperature must be >= 0, got ${temperature}.`);
  if (!Number.isFinite(topP) || topP <= 0 || topP > 1) throw invalidRequest(`topP must be in (0, 1], got ${topP}.`);
  if (!Array.isArray(stop) || stop.some((s) => typeof s !== "string")) throw invalidRequest("stop must be a list of strings.");
  if (seed != null && !Number.isFinite(seed)) throw invalidRequest(`seed must be a number, got ${seed}.`);
  return {
    maxTokens: maxTokens ?? defaultMaxTokens,
    temperature,
    topP,
    stopStrings: stop.filter((s) => s.length > 0),
    // node-llama-cpp's own default seed is the current second, which would give every request started in the
    // same second the same "random" answer.
    seed: seed == null ? randomInt(2 ** 31) : ((Math.trunc(seed) % 2 ** 32) + 2 ** 32) % 2 ** 32,
  };
}

export async function generate(
  pool: SequencePool,
  model: LlamaModel,
  req: GenerationRequest,
  signal?: AbortSignal,
): Promise<GenerationResult> {
  const promptTokens = req.tokens.length;
  if (promptTokens === 0) throw invalidRequest("The prompt is empty.");
  // Evaluated tokens are the prompt plus all but the last generated token: this never overflows the sequence.
  const room = pool.contextSize - promptTokens;
  if (room < 1) throw contextLengthExceeded(promptTokens, pool.contextSize - 1);
  const maxTokens = Math.min(req.maxTokens ?? room, room);
  throwIfAborted(signal);
  if (maxTokens === 0) return { text: "", promptTokens, completionTokens: 0, cachedPromptTokens: 0, finishReason: "length" };

  const sequence = await pool.acquire(req.tokens, signal);
  let failed = false;
  try {
    const cachedPromptTokens = await pool.prepare(sequence, req.tokens);
    throwIfAborted(signal);
    // The history the detokenizer sees, so a word-initial token keeps its leading space.
    const history = req.tokens.slice(-8);
    let completionTokens = 0;
    let text = "";
    let pending: Token[] = [];
    let finishReason: FinishReason = "length";
    /** Append the pending tokens' text; true when that completes a stop string (the text is then cut before it). */
    const flush = (piece = model.detokenize(pending, false, history)) => {
      const checkedUpTo = text.length;
      text += piece;
      history.push(...pending);
      pending = [];
      const hit = findStop(text, req.stopStrings, checkedUpTo);
      if (hit) text = text.slice(0, hit.index);
      return hit !== null;
    };

    const tokens = sequence.evaluate(req.tokens.slice(cachedPromptTokens), {
      temperature: req.temperature,
      topP: req.topP,
      // OpenAI sampling has no top-k or min-p cut (0 turns them off).
      topK: 0,
      minP: 0,
      seed: req.seed,
      yieldEogToken: true,
      evaluationPriority: pool.batchTag(sequence),
    });
    for await (const token of tokens) {
      completionTokens++;
      let stopped = model.isEogToken(token) || req.stopTokens.has(token);
      if (!stopped) {
        pending.push(token);
        const piece = model.detokenize(pending, false, history);
        const partial = piece.endsWith(REPLACEMENT_CHAR) && pending.length < MAX_PARTIAL_TOKENS;
        stopped = !partial && flush(piece);
      }
      if (stopped) finishReason = "stop";
      if (stopped || completionTokens >= maxTokens || signal?.aborted) {
        // Said before the loop is left: closing node-llama-cpp's generator takes a few promise hops, and the
        // other sequences' next decode should not wait for this one meanwhile (batch-order.ts).
        pool.finished(sequence);
        break;
      }
    }
    if (finishReason === "length" && completionTokens < maxTokens && signal?.aborted) throw abortError(signal);
    if (pending.length > 0 && flush()) finishReason = "stop";
    return { text, promptTokens, completionTokens, cachedPromptTokens, finishReason };
  } catch (err) {
    failed = !(err instanceof Error && err.name === "AbortError");
    throw asEngineError(err);
  } finally {
    await pool.release(sequence, failed);
  }
}
