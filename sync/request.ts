// A synchronous request's body checked as a batch line of its endpoint is, and refusals mapped to the control
// plane's errors: `stream` and `stream_options` are the route's to honour (a batch line refuses them), so they are
// checked here and left out of what the backend sees; so is `service_tier` where the endpoint's body has no such
// field. lanes.ts admits and runs the request.

import { SYNC_SERVICE_TIER } from "../anthropic/messages.js";
import { InvalidRequestError, UnavailableError } from "../domain/errors.js";
import { type ServedTier, STREAMED } from "../domain/sync-inference.js";
import type { Endpoint, InferenceRequest } from "../openai/backend.js";
import { HarmlessFields } from "../openai/bodies.js";
import { RequestError } from "../openai/errors.js";
import { parseRequest } from "../parse/request.js";

/** The tier a body asks for: flex, or the default for everything else OpenAI names ("auto", "priority", "scale"). */
export function tierOf(body: unknown): ServedTier {
  return (body as { service_tier?: unknown } | null)?.service_tier === "flex" ? "flex" : "default";
}

/**
 * The request a body makes. `stream` and `stream_options` are this route's to honour (a batch line refuses them):
 * checked here, then left out of what the backend sees.
 */
export function parse(endpoint: Endpoint, body: unknown, streamed: boolean): InferenceRequest {
  requireModel(endpoint, body);
  if (UNTIERED.includes(endpoint) && typeof body === "object" && body !== null && "service_tier" in body) {
    const { service_tier, ...rest } = body as Record<string, unknown>;
    if (!HarmlessFields.service_tier.safeParse(service_tier).success)
      throw new InvalidRequestError(
        `Invalid value for 'service_tier': ${JSON.stringify(service_tier)}; it takes auto, default, flex, scale or priority.`,
        "invalid_request",
        "service_tier",
      );
    return parse(endpoint, rest, streamed);
  }
  const b = (body ?? {}) as Record<string, unknown>;
  if (b.stream === true && !STREAMED.includes(endpoint))
    throw new InvalidRequestError(`${endpoint} answers whole here: stream is not served for it.`, "unsupported_value", "stream");
  if (b.stream === true && !streamed) throw new Error("a streamed request came without its stream");
  // A body that is not an object is refused as such there (an array's entries are not its fields).
  if (!STREAMED.includes(endpoint) || typeof body !== "object" || body === null || Array.isArray(body))
    return withDomainErrors(() => parseRequest(endpoint, body));
  if (endpoint === "/v1/messages") {
    // Its stream is a boolean, which Anthropic's schema checks; it has no stream options.
    const { stream: _, ...rest } = b;
    if (typeof b.stream !== "boolean" && b.stream !== undefined) return withDomainErrors(() => parseRequest(endpoint, body));
    return withDomainErrors(() => parseRequest(endpoint, rest));
  }
  const { stream, stream_options, ...rest } = b;
  if (stream !== undefined && stream !== null && typeof stream !== "boolean")
    throw new InvalidRequestError("Invalid type for 'stream': expected a boolean.", "invalid_type", "stream");
  if (stream_options !== undefined && stream_options !== null) {
    if (stream !== true)
      throw new InvalidRequestError("stream_options is only allowed when stream is true.", "invalid_request", "stream_options");
    // A response's stream has no usage chunk to ask for: its completed event carries the usage.
    checkStreamOptions(stream_options, endpoint === "/v1/responses" ? ["include_obfuscation"] : ["include_usage", "include_obfuscation"]);
  }
  return withDomainErrors(() => parseRequest(endpoint, rest));
}

/**
 * OpenAI's endpoints require a `model` on a request (its clients' types do too): one without is refused, as OpenAI
 * refuses it, rather than answered by whichever model is the default. A batch line may leave it to the batch, whose
 * object names the model that serves it; the ranking endpoints' model is optional as in the APIs they follow, and
 * Anthropic's schema requires its own.
 */
function requireModel(endpoint: Endpoint, body: unknown): void {
  if (!MODEL_REQUIRED.includes(endpoint) || typeof body !== "object" || body === null || Array.isArray(body)) return;
  const model = (body as { model?: unknown }).model;
  if (model === undefined || model === null)
    throw new InvalidRequestError("Missing required parameter: 'model'.", "missing_required_parameter", "model");
}

const MODEL_REQUIRED: readonly Endpoint[] = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"];

/** OpenAI's stream options: include_usage (chat, completions), and include_obfuscation (whose padding this service never adds). */
function checkStreamOptions(options: unknown, known: readonly string[]): void {
  if (typeof options !== "object" || options === null || Array.isArray(options))
    throw new InvalidRequestError("Invalid type for 'stream_options': expected an object.", "invalid_type", "stream_options");
  const unknown = Object.keys(options).find((k) => !known.includes(k));
  if (unknown !== undefined)
    throw new InvalidRequestError(
      `Unrecognized stream option '${unknown}': stream_options takes ${known.join(" and ")}.`,
      "unknown_parameter",
      `stream_options.${unknown}`,
    );
  for (const k of known) {
    const v = (options as Record<string, unknown>)[k];
    if (v !== undefined && typeof v !== "boolean")
      throw new InvalidRequestError(`Invalid type for 'stream_options.${k}': expected a boolean.`, "invalid_type", `stream_options.${k}`);
  }
}

/** A backend's refusal as the control plane's: a bad request is a 400 naming the field, a transient failure a 503. */
export function domainError(err: unknown): unknown {
  if (!(err instanceof RequestError)) return err;
  if (err.retryable) return new UnavailableError(err.message, "backend_unavailable", 1, { cause: err });
  return new InvalidRequestError(err.message, err.code, err.param);
}

/** `work` (a check or a parse), what it throws as the control plane's errors (domainError). */
export function withDomainErrors<T>(work: () => T): T {
  try {
    return work();
  } catch (err) {
    throw domainError(err);
  }
}

/**
 * Endpoints whose body and answer have no `service_tier` (OpenAI's embeddings; the ranking ones): a synchronous
 * request still picks its lane with it, a field of the route, and its answer is as the endpoint's type defines it.
 */
const UNTIERED: readonly Endpoint[] = ["/v1/embeddings", "/v1/rerank", "/v1/score"];

/**
 * The body naming the tier that served it where its type has a field for it: a chat completion's and a response's
 * `service_tier`, Anthropic's `usage.service_tier` ("standard"). OpenAI's Completion has none, nor have the others.
 */
export function withTier(endpoint: Endpoint, body: Record<string, unknown>, tier: ServedTier): Record<string, unknown> {
  if (endpoint === "/v1/messages") return { ...body, usage: { ...(body.usage as object), service_tier: SYNC_SERVICE_TIER } };
  if (endpoint === "/v1/chat/completions" || endpoint === "/v1/responses") return { ...body, service_tier: tier };
  return body;
}
