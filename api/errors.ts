// OpenAI-shaped errors: {"error":{"message","type","param","code"}} with the right HTTP status.
// Thrown anywhere in the control plane; rendered by the error middleware in api/http/error-handler.ts.

export type ErrorType = "invalid_request_error" | "authentication_error" | "not_found_error" | "rate_limit_error" | "server_error";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: ErrorType = "invalid_request_error",
    readonly code: string | null = null,
    readonly param: string | null = null,
    /** Extra response headers (e.g. Retry-After). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }

  toBody() {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export const badRequest = (message: string, param: string | null = null, code: string | null = "invalid_request") =>
  new ApiError(400, message, "invalid_request_error", code, param);

export const notFound = (what: string, id: string, param: string | null = null) =>
  new ApiError(404, `No ${what} found with id '${id}'.`, "invalid_request_error", "not_found", param);

export const conflict = (message: string, code = "conflict") => new ApiError(409, message, "invalid_request_error", code);

export const queueFull = (retryAfterSeconds: number) =>
  new ApiError(429, "The batch queue is full; retry later.", "rate_limit_error", "queue_full", null, {
    "Retry-After": String(retryAfterSeconds),
  });

export const unauthorized = (message = "Missing or invalid API key. Send 'Authorization: Bearer <key>'.") =>
  new ApiError(401, message, "authentication_error", "invalid_api_key");

/** The service is draining for a shutdown: nothing new is accepted, a client should retry (elsewhere or later). */
export const shuttingDown = (retryAfterSeconds: number) =>
  new ApiError(503, "The service is shutting down and accepts no new batches; retry shortly.", "server_error", "shutting_down", null, {
    "Retry-After": String(retryAfterSeconds),
  });
