// The one error a backend throws for a request it cannot serve. `retryable` says whether trying again later
// can help (a transient resource failure) or not (a bad body, a context overflow, a parameter refused); a
// request that is not retried becomes that request's error line, with `param` naming the field at fault.

export class RequestError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly retryable: boolean,
    readonly param: string | null = null,
    /** What an upstream server answered: the request's error line carries its status and body as they came. */
    readonly upstream?: { status: number; body: unknown },
  ) {
    super(message);
    this.name = "RequestError";
  }
}

/** A parameter (or a value of it) that this backend cannot honour: refused, never ignored. */
export const unsupportedParameter = (param: string, message: string) => new RequestError(message, "unsupported_parameter", false, param);

export const unsupportedValue = (param: string, message: string) => new RequestError(message, "unsupported_value", false, param);

export const invalidParameter = (param: string | null, message: string) => new RequestError(message, "invalid_request", false, param);

/** A prompt plus the tokens asked for by `param` past the context, as OpenAI words it (a 400 on that line). */
export const completionTooLong = (context: number, prompt: number, asked: number, param: string) =>
  new RequestError(
    `This model's maximum context length is ${context} tokens. However, you requested ${prompt + asked} tokens ` +
      `(${prompt} in the prompt, ${asked} in ${param}). Please reduce the prompt or ${param} (at most ${context - prompt} here).`,
    "context_length_exceeded",
    false,
    param,
  );

/** The field holding each endpoint's prompt: what a refusal of a prompt too long for the context names. */
export const PROMPT_FIELD: Readonly<Record<string, string>> = {
  "/v1/chat/completions": "messages",
  "/v1/completions": "prompt",
  "/v1/embeddings": "input",
  "/v1/rerank": "documents",
  "/v1/score": "text_2",
};
