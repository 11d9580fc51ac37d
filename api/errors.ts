// OpenAI-shaped errors: {"error":{"message","type","param","code"}} with the right HTTP status.
// The HTTP surface's own refusals (auth, uploads, routes); the control plane's are the domain's errors
// (domain/errors.ts), mapped to these by api/http/error-handler.ts.

export type ErrorType = "invalid_request_error" | "permission_error" | "not_found_error" | "rate_limit_error" | "server_error";

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

/**
 * A 401 as api.openai.com answers it: type `invalid_request_error` (the clients raise AuthenticationError from the
 * status), code `invalid_api_key` for a key it does not know and null for none at all. Anthropic's routes map the
 * status to their own `authentication_error` (api/anthropic.ts).
 */
export const unauthorized = (wrongKey = false) =>
  wrongKey
    ? new ApiError(
        401,
        "Incorrect API key provided. Send one of this service's keys as 'Authorization: Bearer <key>' (or 'x-api-key: <key>').",
        "invalid_request_error",
        "invalid_api_key",
      )
    : new ApiError(
        401,
        "You didn't provide an API key. Send it in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY), or as 'x-api-key: YOUR_KEY'.",
        "invalid_request_error",
        null,
      );

export const forbidden = (message: string) => new ApiError(403, message, "permission_error", "insufficient_permissions");

/**
 * The machine ran out of disk or file descriptors: the caller's business to know (507 or 503, with a code
 * saying which), not an internal error. Nothing was accepted; retrying later can succeed.
 */
export const storageExhausted = (errno: string, retryAfterSeconds = 30) =>
  errno === "ENOSPC" || errno === "EDQUOT"
    ? new ApiError(
        507,
        "The service's storage is full; nothing was stored. Retry once space is freed.",
        "server_error",
        "storage_full",
        null,
        {
          "Retry-After": String(retryAfterSeconds),
        },
      )
    : new ApiError(
        503,
        "The service has run out of file descriptors; nothing was stored. Retry shortly.",
        "server_error",
        "too_many_open_files",
        null,
        {
          "Retry-After": String(retryAfterSeconds),
        },
      );

/**
 * /ready while the disk under BATCH_DIR is full or read-only: the process serves reads, but a load balancer should
 * send it no upload or create, which it would have to refuse.
 */
export const storageNotWritable = (state: "full" | "read_only", retryAfterSeconds = 30) =>
  new ApiError(
    503,
    state === "full"
      ? "Not ready: the disk under BATCH_DIR is full. Writes answer 507 storage_full until space is freed; reads are still served."
      : "Not ready: the disk under BATCH_DIR is read-only or failing. Writes answer 503 storage_unavailable until it takes them again; reads are still served.",
    "server_error",
    "storage_not_writable",
    null,
    { "Retry-After": String(retryAfterSeconds) },
  );

export const fileTooLarge = (maxFileBytes: number, param: string | null = "file") =>
  new ApiError(413, `The file is larger than the limit of ${maxFileBytes} bytes.`, "invalid_request_error", "file_too_large", param);

export const modelNotReady = (message = "The model is not loaded yet.") =>
  new ApiError(503, message, "server_error", "model_not_ready", null, { "Retry-After": "5" });

/** Every answer of a process that holds its port while its model loads (app/main.ts). */
export const starting = (message = "The server is starting: its model is loading, or it is reaching its database. Retry shortly.") =>
  new ApiError(503, message, "server_error", "starting", null, {
    "Retry-After": "5",
  });

export const shuttingDown = () =>
  new ApiError(503, "The server is shutting down; another one takes the work.", "server_error", "shutting_down", null, {
    "Retry-After": "1",
  });

export const internalError = () =>
  new ApiError(500, "The server had an error while processing your request.", "server_error", "internal_error");
