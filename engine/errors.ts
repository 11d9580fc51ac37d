// The errors the engine throws, beyond RequestError itself.
import { DisposedError } from "node-llama-cpp";
import { RequestError } from "../openai/errors.js";

/**
 * The error for a request stopped by its AbortSignal. Named "AbortError" (as fetch and timers name theirs)
 * so callers can tell it from a failure; the signal's reason is kept as `cause`.
 */
export function abortError(signal?: AbortSignal): Error {
  const err = new Error("The request was aborted.", { cause: signal?.reason });
  err.name = "AbortError";
  return err;
}

export function throwIfAborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw abortError(signal);
}

/** `limit`: the most tokens that fit (a generation needs room for at least one new token). */
export const contextLengthExceeded = (tokens: number, limit: number, what = "prompt", param: string | null = null) =>
  new RequestError(
    `The ${what} is ${tokens} tokens long, but at most ${limit} fit in the model's context. Shorten it.`,
    "context_length_exceeded",
    false,
    param,
  );

export const invalidRequest = (message: string) => new RequestError(message, "invalid_request", false);

export const engineClosed = () => new RequestError("The engine is closed.", "engine_closed", true);

/**
 * Whatever else escapes node-llama-cpp mid-request (a failed decode, a disposed sequence) is a fault of the
 * moment, not of the request, so it may be retried; the request's own errors pass through unchanged.
 */
export function asEngineError(err: unknown): unknown {
  if (err instanceof RequestError) return err;
  if (err instanceof Error && err.name === "AbortError") return err;
  // The engine was closed under the request.
  if (err instanceof DisposedError) return engineClosed();
  const message = err instanceof Error ? err.message : String(err);
  return new RequestError(`Inference failed: ${message}`, "engine_error", true);
}

/** A rank or score line for a model with no classification head: refused, naming the model as the client names it. */
export const cannotRank = (model: string) =>
  new RequestError(
    `The model '${model}' cannot rank: it has no classification head. A reranker GGUF (such as bge-reranker or Qwen3-Reranker) has one.`,
    "model_cannot_rank",
    false,
    "model",
  );
