// Every failure leaves the server as an OpenAI-shaped error: {"error":{"message","type","param","code"}}.
// Unknown errors become a bare 500; their details go to the log, never to the client.
import type { ErrorRequestHandler, RequestHandler } from "express";
import { MulterError } from "multer";
import { z } from "zod";
import {
  ControlError,
  GoneError,
  ModelNotFoundError,
  NotFoundError,
  StorageUnavailableError,
  storageUnavailable,
  UnavailableError,
} from "../../domain/errors.js";
import { notAnObject } from "../../openai/parse.js";
import { exhaustedErrno, isStorageFault } from "../../stores/errors.js";
import { anthropicErrorBody, isAnthropicRequest } from "../anthropic.js";
import { ApiError, badRequest, fileTooLarge, internalError, storageExhausted } from "../errors.js";
import { UPLOAD_FORM } from "./upload.js";
import { fromZodError } from "./validate.js";

/** Express error from body-parser / http-errors: a status and a machine-readable type. */
interface HttpError {
  status?: number;
  /** body-parser's: the bytes the route takes. */
  limit?: number;
  /** body-parser's: the text that failed to parse. */
  body?: unknown;
  statusCode?: number;
  type?: string;
  expose?: boolean;
  message?: string;
}

/** What is wrong with a form past one of the upload's bounds (upload.ts), and the field at fault where there is one. */
function multerProblem(err: MulterError): { message: string; param: string | null } {
  const form = "an upload's form holds one file part named 'file' and its fields (purpose, expires_after)";
  switch (err.code) {
    case "LIMIT_FIELD_COUNT":
      return { message: `the form has more than ${UPLOAD_FORM.fields} fields; ${form}`, param: null };
    case "LIMIT_PART_COUNT":
      return { message: `the form has more than ${UPLOAD_FORM.parts} parts; ${form}`, param: null };
    case "LIMIT_FILE_COUNT":
      return { message: `the form has more than one file; ${form}`, param: "file" };
    case "LIMIT_FIELD_KEY":
      return { message: `a field's name is longer than ${UPLOAD_FORM.fieldNameSize} bytes; ${form}`, param: null };
    case "LIMIT_FIELD_VALUE":
      return { message: `the field '${err.field ?? ""}' is longer than ${UPLOAD_FORM.fieldSize} bytes`, param: err.field ?? null };
    default:
      return { message: err.message, param: null };
  }
}

function fromMulter(err: MulterError, maxFileBytes: number): ApiError {
  if (err.code === "LIMIT_FILE_SIZE") return fileTooLarge(maxFileBytes, "file");
  if (err.code === "LIMIT_UNEXPECTED_FILE") {
    return badRequest(`Unexpected file part '${err.field ?? ""}': send exactly one file, in the part named 'file'.`, "file");
  }
  const { message, param } = multerProblem(err);
  return badRequest(`Invalid multipart upload: ${message}.`, param, "invalid_multipart");
}

function jsonScalar(body: unknown): { ok: true; value: unknown } | { ok: false } {
  if (typeof body !== "string" || body.length > 1024) return { ok: false };
  try {
    return { ok: true, value: JSON.parse(body) };
  } catch {
    return { ok: false };
  }
}

function fromHttpError(err: HttpError): ApiError | undefined {
  const status = err.status ?? err.statusCode;
  if (typeof status !== "number" || status < 400 || status >= 500) return undefined;
  switch (err.type) {
    case "entity.parse.failed": {
      // The JSON parser takes objects and arrays only: a scalar is valid JSON, refused for what it is.
      const scalar = jsonScalar(err.body);
      return new ApiError(
        400,
        scalar.ok ? notAnObject(scalar.value) : "We could not parse the JSON body of your request. Send valid JSON.",
        "invalid_request_error",
        scalar.ok ? "invalid_request" : "invalid_json",
      );
    }
    case "entity.too.large":
      return new ApiError(
        413,
        `The request body is larger than this route takes${err.limit === undefined ? "" : ` (${err.limit} bytes)`}; a large input belongs in a file upload.`,
        "invalid_request_error",
        "request_too_large",
      );
    case "encoding.unsupported":
    case "charset.unsupported":
      return new ApiError(415, err.message ?? "Unsupported body encoding.", "invalid_request_error", "unsupported_encoding");
  }
  // Other http-errors with expose=true carry a message meant for the client.
  return new ApiError(status, err.expose && err.message ? err.message : "Bad request.", "invalid_request_error", null);
}

/** The control plane's refusals as HTTP answers: 404, 429 or 503 with Retry-After, else 400. */
function fromControlError(err: ControlError | StorageUnavailableError): ApiError {
  if (err instanceof NotFoundError || err instanceof ModelNotFoundError || err instanceof GoneError)
    return new ApiError(404, err.message, "invalid_request_error", err.code, err.param);
  if (err instanceof UnavailableError || err instanceof StorageUnavailableError) {
    const full = err.code === "queue_full" || err.code === "resource_unavailable" || err.code === "token_limit_exceeded";
    const [status, type] = full ? ([429, "rate_limit_error"] as const) : ([503, "server_error"] as const);
    return new ApiError(status, err.message, type, err.code, err.param, { "Retry-After": String(err.retryAfterSeconds) });
  }
  return new ApiError(400, err.message, "invalid_request_error", err.code, err.param);
}

/** Maps anything thrown by a route or middleware to an ApiError; undefined means "unexpected". */
export function toApiError(err: unknown, opts: { maxFileBytes: number }): ApiError | undefined {
  if (err instanceof ApiError) return err;
  if (err instanceof ControlError || err instanceof StorageUnavailableError) return fromControlError(err);
  if (err instanceof MulterError) return fromMulter(err, opts.maxFileBytes);
  // Routes parse through parseRequest; a raw ZodError here came from deeper down and has no input at hand.
  if (err instanceof z.ZodError) return fromZodError(err);
  const errno = exhaustedErrno(err);
  if (errno) return storageExhausted(errno);
  if (isStorageFault(err)) return fromControlError(storageUnavailable(err));
  if (err && typeof err === "object") return fromHttpError(err as HttpError);
  return undefined;
}

/** OpenAI's envelope, or Anthropic's on Anthropic's routes. */
export function sendApiError(req: Parameters<RequestHandler>[0], res: Parameters<RequestHandler>[1], error: ApiError): void {
  const id = res.getHeader("x-request-id");
  const body = isAnthropicRequest(req) ? anthropicErrorBody(error, typeof id === "string" ? id : null) : error.toBody();
  res.set(error.headers).status(error.status).json(body);
}

/** OpenAI's answer to a route it does not serve: "Invalid URL (METHOD /path)", with what to do where we know. */
export function unknownUrl(method: string, path: string, hint?: string): ApiError {
  const shown = path.length > 200 ? `${path.slice(0, 200)}...` : path;
  return new ApiError(404, `Invalid URL (${method} ${shown})${hint ? `: ${hint}` : ""}`, "invalid_request_error", "unknown_url");
}

/** The last middleware: unknown routes. */
export const unknownRoute: RequestHandler = (req, res) => {
  sendApiError(req, res, unknownUrl(req.method, req.path));
};

export function errorHandler(opts: { maxFileBytes: number; onStorageFault?: (err: unknown) => void }): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const apiError = toApiError(err, opts);
    if (apiError && (apiError.status === 507 || apiError.code === "storage_unavailable")) opts.onStorageFault?.(err);
    // pino-http logs the request line; attaching the error puts the cause (with its stack) in that line. A refusal
    // for now (Retry-After) has its cause logged once, as an outage (request-log.ts).
    if (!apiError || (apiError.status >= 500 && !apiError.headers["Retry-After"])) (res as { err?: unknown }).err = err;
    if (res.headersSent) {
      // A stream broke after the status line went out: all we can still do is cut the response short.
      req.log?.error({ err }, "response failed after headers were sent");
      res.destroy();
      return;
    }
    sendApiError(req, res, apiError ?? internalError());
  };
}
