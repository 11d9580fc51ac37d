// Anthropic's Message Batches API as a view of our batches: a batch for /v1/messages shown as a
// `message_batch`, its result lines as `{custom_id, result}`, and errors in Anthropic's envelope.
import { z } from "zod";
import { endedAt, isFinal } from "../domain/batch-state.js";
import type { Batch } from "../domain/objects.js";
import type { ApiError } from "./errors.js";
import { messageBatchId, queryInt, queryObject } from "./schemas/requests.js";

/** Routes answered in Anthropic's shapes (errors included). */
export const ANTHROPIC_PREFIX = "/v1/messages";

/**
 * Anthropic's routes, and the Models API's when an Anthropic client asks (its SDK sends `anthropic-version` on
 * every request): /v1/models is the same path in both APIs, with different shapes.
 */
export const isAnthropicRequest = (req: { path: string; get(name: string): string | undefined }) =>
  req.path === ANTHROPIC_PREFIX ||
  req.path.startsWith(`${ANTHROPIC_PREFIX}/`) ||
  ((req.path === "/v1/models" || req.path.startsWith("/v1/models/")) && req.get("anthropic-version") !== undefined);

/** Anthropic's list paging: forward after `after_id`, back before `before_id`, `limit` 1..1000 (default 20). */
export const AnthropicPageQuery = queryObject({
  after_id: z.string().max(256).optional(),
  before_id: z.string().max(256).optional(),
  limit: queryInt("limit", { min: 1, max: 1000 }).default(20).openapi({ default: 20 }),
}).refine((q) => q.after_id === undefined || q.before_id === undefined, {
  path: ["before_id"],
  message: "Give after_id or before_id, not both.",
});

/** Anthropic's error types by HTTP status; its 5xx are api_error, and overloaded_error for a full or busy service. */
function errorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 413) return "request_too_large";
  if (status === 429) return "rate_limit_error";
  if (status === 503) return "overloaded_error";
  return status >= 500 ? "api_error" : "invalid_request_error";
}

/** `{type: "error", error: {type, message}, request_id}`; the field at fault is named in the message. */
export function anthropicError(status: number, message: string, param: string | null, requestId: string | null) {
  const text = param && !message.includes(param) ? `${param}: ${message}` : message;
  return { type: "error" as const, error: { type: errorType(status), message: text }, request_id: requestId };
}

export const anthropicErrorBody = (e: ApiError, requestId: string | null) => anthropicError(e.status, e.message, e.param, requestId);

export interface RequestCounts {
  processing: number;
  succeeded: number;
  errored: number;
  canceled: number;
  expired: number;
}

const iso = (seconds: number | null | undefined) => (seconds == null ? null : new Date(seconds * 1000).toISOString());

/** Anthropic's `ended` is our final status: every request has its result. */
export function toMessageBatch(b: Batch, resultsUrl: string, ended: Omit<RequestCounts, "processing"> | null) {
  const status = isFinal(b.status) ? "ended" : b.status === "cancelling" ? "canceling" : "in_progress";
  const total = b.request_counts?.total ?? 0;
  // Anthropic moves requests out of `processing` only once the whole batch has ended.
  const counts: RequestCounts = ended
    ? { processing: 0, ...ended }
    : { processing: total, succeeded: 0, errored: 0, canceled: 0, expired: 0 };
  return {
    id: messageBatchId(b.id),
    type: "message_batch" as const,
    processing_status: status,
    request_counts: counts,
    created_at: iso(b.created_at)!,
    expires_at: iso(b.expires_at ?? b.deadline_at)!,
    ended_at: iso(endedAt(b)),
    cancel_initiated_at: iso(b.cancelling_at),
    archived_at: null,
    results_url: status === "ended" ? resultsUrl : null,
  };
}

interface OutputLine {
  /** The line's own id (batch_req_…), which an error line without a response is known by. */
  id?: string;
  custom_id: string;
  response: { status_code: number; request_id?: string; body: Record<string, unknown> } | null;
  error: { code: string; message: string } | null;
}

/** One output or error line of ours as Anthropic's result line. */
export function toResultLine(line: OutputLine) {
  const { custom_id, response, error } = line;
  if (response && response.status_code < 300) return { custom_id, result: { type: "succeeded", message: response.body } };
  if (error?.code === "batch_cancelled") return { custom_id, result: { type: "canceled" } };
  if (error?.code === "batch_expired") return { custom_id, result: { type: "expired" } };
  if (response) {
    const e = (response.body as { error?: { message?: string; param?: string | null } }).error;
    const failure = anthropicError(
      response.status_code,
      e?.message ?? "The request failed.",
      e?.param ?? null,
      response.request_id ?? line.id ?? null,
    );
    return { custom_id, result: { type: "errored", error: failure } };
  }
  return {
    custom_id,
    result: { type: "errored", error: anthropicError(500, error?.message ?? "The request failed.", null, line.id ?? null) },
  };
}
