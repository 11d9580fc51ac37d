// What every router's OpenAPI paths share: JSON and error responses, keyed and open routes. The documented error
// bodies are built by the same constructors the service throws, so they cannot drift from the real ones.
import type { ResponseConfig, RouteConfig } from "@asteasolutions/zod-to-openapi";
import type { z } from "zod";
import { queueFull } from "../../domain/errors.js";
import { ErrorSchema } from "../../domain/objects.js";
import { badRequest, fileTooLarge, forbidden, internalError, modelNotReady, notFound, unauthorized } from "../errors.js";
import { toApiError } from "./error-handler.js";

export const jsonResponse = (schema: z.ZodType, description: string): ResponseConfig => ({
  description,
  content: { "application/json": { schema } },
});

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: "Invalid request: `param` names the offending parameter.",
  401: "Missing or wrong API key (only when the service runs with API_KEYS or KEYS_FILE).",
  403: "Not this key's to do: it needs an admin key (KEYS_FILE's `admin: true`), or (an admin's) it is another key's batch.",
  404: "No such object (or it belongs to another API key).",
  413: "The upload or body is larger than the configured limit.",
  429: "The batch queue is full; retry after the Retry-After header's seconds.",
  503: "Not now: the model is not loaded yet, or the service is shutting down (see Retry-After).",
};

const ERROR_EXAMPLES: Record<number, object> = {
  400: badRequest("Invalid 'limit': must be between 1 and 100.", "limit").toBody(),
  401: unauthorized().toBody(),
  403: forbidden("The API key 'team-a' is not an admin key; only an admin key may read the organization's usage, costs and keys.").toBody(),
  404: notFound("batch", "batch_x").toBody(),
  413: fileTooLarge(209_715_200).toBody(),
  429: toApiError(queueFull(30), { maxFileBytes: 0 })!.toBody(),
  500: internalError().toBody(),
  503: modelNotReady().toBody(),
};

export function errorResponses(...statuses: number[]): RouteConfig["responses"] {
  const out: RouteConfig["responses"] = {};
  for (const s of [...statuses, 500]) {
    out[String(s)] = {
      description: ERROR_DESCRIPTIONS[s] ?? "Internal error.",
      content: { "application/json": { schema: ErrorSchema, example: ERROR_EXAMPLES[s] } },
    };
  }
  return out;
}

type Route = Omit<RouteConfig, "security">;

/** The /v1 routes (and the operational views) require a key when API_KEYS is set. */
export const keyedRoute = (route: Route): RouteConfig => ({ ...route, security: [{ bearerAuth: [] }] });
export const openRoute = (route: Route): RouteConfig => ({ ...route, security: [] });
