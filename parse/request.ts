// A request line of any served endpoint checked against its body's schema: OpenAI's (openai/parse.ts), or that of
// the folder defining the endpoint (Anthropic's Messages: anthropic/params.ts), by the same rules, so a refusal is the
// same 400 whose `param` names the field as the client wrote it. The one place both APIs' bodies meet.
import type { z } from "zod";
import { MessagesParamsSchema } from "../anthropic/params.js";
import type { Endpoint, ForeignEndpoint, InferenceRequest } from "../openai/backend.js";
import { bodySchemaFor as openAISchemaFor, parseBody } from "../openai/parse.js";

const FOREIGN: Readonly<Record<ForeignEndpoint, z.ZodType>> = { "/v1/messages": MessagesParamsSchema };
const isForeign = (endpoint: Endpoint): endpoint is ForeignEndpoint => Object.hasOwn(FOREIGN, endpoint);

/** The schema of an endpoint's body; none for a string that names no endpoint (parseRequest refuses it). */
export const bodySchemaFor = (endpoint: Endpoint): z.ZodType => (isForeign(endpoint) ? FOREIGN[endpoint] : openAISchemaFor(endpoint));

/**
 * Throws a non-retryable RequestError (invalid_request, unknown_parameter, missing_required_parameter,
 * nesting_too_deep, or invalid_url for an endpoint not served).
 */
export const parseRequest = (endpoint: Endpoint, body: unknown): InferenceRequest => parseBody(endpoint, bodySchemaFor(endpoint), body);
