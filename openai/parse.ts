// A request body checked against its endpoint's schema, as OpenAI answers a bad request: a 400 whose
// `param` names the field at fault. OpenAI's endpoints here; an endpoint whose body another folder defines is
// checked by the same rules with that folder's schema (parse/request.ts composes both).
import type { z } from "zod";
import { checkAnswerSize } from "./answer-size.js";
import type { Endpoint, InferenceRequest, OpenAIEndpoint } from "./backend.js";
import { ChatBodySchema, CompletionBodySchema, EmbeddingBodySchema } from "./bodies.js";
import { RequestError } from "./errors.js";
import { checkNesting } from "./json-depth.js";
import { RerankBodySchema, ScoreBodySchema } from "./rank.js";
import { ResponseBodySchema } from "./response-bodies.js";
import { describeIssue } from "./zod-errors.js";

const SCHEMAS: Readonly<Record<OpenAIEndpoint, z.ZodType>> = {
  "/v1/chat/completions": ChatBodySchema,
  "/v1/completions": CompletionBodySchema,
  "/v1/embeddings": EmbeddingBodySchema,
  "/v1/responses": ResponseBodySchema,
  "/v1/rerank": RerankBodySchema,
  "/v1/score": ScoreBodySchema,
};

/** The schema of an endpoint's body; none for a string that names no endpoint (parseBody refuses it). */
export const bodySchemaFor = (endpoint: OpenAIEndpoint): z.ZodType =>
  (Object.hasOwn(SCHEMAS, endpoint) ? SCHEMAS[endpoint] : undefined) as z.ZodType;

/**
 * Throws a non-retryable RequestError (invalid_request, unknown_parameter, missing_required_parameter, or
 * nesting_too_deep before anything walks the body).
 */
export const parseRequest = (endpoint: OpenAIEndpoint, body: unknown): InferenceRequest =>
  parseBody(endpoint, bodySchemaFor(endpoint), body);

/** A body checked against `schema`, its endpoint's, whichever folder defines it; refused as parseRequest refuses. */
export function parseBody(endpoint: Endpoint, schema: z.ZodType | undefined, body: unknown): InferenceRequest {
  if (!schema) throw new RequestError(`Unsupported endpoint '${String(endpoint)}'.`, "invalid_url", false);
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new RequestError(notAnObject(body), "invalid_request", false);
  checkNesting(body);
  const r = schema.safeParse(body);
  if (!r.success) {
    const { message, param, missing, unknown } = describeIssue(r.error, body);
    const code = unknown ? "unknown_parameter" : missing ? "missing_required_parameter" : "invalid_request";
    throw new RequestError(message, code, false, param);
  }
  const request = { endpoint, body: r.data } as InferenceRequest;
  checkAnswerSize(request);
  return request;
}

/** What a body that is not a JSON object is told, naming what it is. */
export const notAnObject = (body: unknown): string => `The request body must be a JSON object, not ${kindOf(body)}.`;

/** What a JSON value is, as an error names it: "an array", "a string", "null". */
const kindOf = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : value === undefined ? "nothing" : `a ${typeof value}`;
