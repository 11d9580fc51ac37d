// A request body checked against its endpoint's schema, as OpenAI answers a bad request: a 400 whose
// `param` names the field at fault.
import type { z } from "zod";
import { MessagesParamsSchema } from "../anthropic/params.js";
import { checkAnswerSize } from "./answer-size.js";
import type { Endpoint, InferenceRequest } from "./backend.js";
import { ChatBodySchema, CompletionBodySchema, EmbeddingBodySchema } from "./bodies.js";
import { RequestError } from "./errors.js";
import { checkNesting } from "./json-depth.js";
import { RerankBodySchema, ScoreBodySchema } from "./rank.js";
import { ResponseBodySchema } from "./response-bodies.js";
import { describeIssue } from "./zod-errors.js";

export function bodySchemaFor(endpoint: Endpoint): z.ZodType {
  switch (endpoint) {
    case "/v1/chat/completions":
      return ChatBodySchema;
    case "/v1/completions":
      return CompletionBodySchema;
    case "/v1/embeddings":
      return EmbeddingBodySchema;
    case "/v1/responses":
      return ResponseBodySchema;
    case "/v1/messages":
      return MessagesParamsSchema;
    case "/v1/rerank":
      return RerankBodySchema;
    case "/v1/score":
      return ScoreBodySchema;
  }
}

/**
 * Throws a non-retryable RequestError (invalid_request, unknown_parameter, missing_required_parameter, or
 * nesting_too_deep before anything walks the body).
 */
export function parseRequest(endpoint: Endpoint, body: unknown): InferenceRequest {
  const schema = bodySchemaFor(endpoint);
  if (!schema) throw new RequestError(`Unsupported endpoint '${String(endpoint)}'.`, "invalid_url", false);
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
