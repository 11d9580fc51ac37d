// Retrying a finished batch's failed lines (our extension, POST /v1/batches/{id}/retry): which lines of its error
// file go into the new batch, and what the new batch says it retries. Lines that succeeded are never among them.
import { METADATA_LIMITS } from "./objects.js";

export interface RetryFilter {
  /** Only lines whose error code is one of these (the line's `error.code`, else its response body's). */
  codes?: string[];
  /** Lines a cancel left unrun (`batch_cancelled`); default true. */
  include_cancelled?: boolean;
  /** Lines an expiry left unrun (`batch_expired`); default true. */
  include_expired?: boolean;
}

/** The code an error-file line carries: an unrun line's `error.code`, a failed request's body's, else its HTTP status. */
export function errorCodeOf(line: {
  error?: { code?: unknown } | null;
  response?: { status_code?: unknown; body?: { error?: { code?: unknown } } } | null;
}): string {
  const code = line.error?.code ?? line.response?.body?.error?.code;
  if (typeof code === "string" && code) return code;
  return `http_${String(line.response?.status_code ?? "error")}`;
}

export function wantsRetry(code: string, filter: RetryFilter): boolean {
  if (code === "batch_cancelled" && filter.include_cancelled === false) return false;
  if (code === "batch_expired" && filter.include_expired === false) return false;
  return !filter.codes || filter.codes.includes(code);
}

/** The original's metadata and `retry_of`; an original already at the key limit gives up its last key for it. */
export function retryMetadata(original: Record<string, string> | null | undefined, batchId: string): Record<string, string> {
  const kept = Object.entries(original ?? {}).filter(([k]) => k !== "retry_of");
  return { ...Object.fromEntries(kept.slice(0, METADATA_LIMITS.keys - 1)), retry_of: batchId };
}
