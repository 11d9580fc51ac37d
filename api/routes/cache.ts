// The result cache's purge for admin keys: DELETE /v1/cache forgets every remembered answer, and with `api_key_id`
// those a key's requests read (its own, or the cache the keys file has it share). A key that is not an admin's gets 403.
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import { OPEN_SCOPE } from "../../cache/caching-backend.js";
import type { ResultCache } from "../../cache/port.js";
import type { KeyRing } from "../../config/keys.js";
import type { Organization } from "../../domain/usage.js";
import { ApiError, badRequest } from "../errors.js";
import type { ResultCachePurge } from "../http/app-deps.js";
import { adminOnly } from "../http/auth.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import { parseRequest } from "../http/validate.js";
import type { RouteModule } from "./route-module.js";

const PurgeQuery = z
  .object({
    api_key_id: z
      .string()
      .min(1)
      .optional()
      .openapi({ description: "Only the answers this key's requests read (a shared `cache_scope`: every key naming it). Absent: all." }),
  })
  .strict();

const Purged = z
  .object({
    object: z.literal("result_cache.purge"),
    api_key_id: z.string().nullable(),
    deleted: z.number().int().openapi({ description: "Answers removed." }),
  })
  .openapi("ResultCachePurge");

const cacheOff = () =>
  new ApiError(
    400,
    "The result cache is off on this deployment (RESULT_CACHE=off): it remembers no answer to purge.",
    "invalid_request_error",
    "result_cache_off",
  );

/** The purge of `cache`: an owner's scope as its batches and requests name it (KeyRing.cacheScopeOf), or all. */
export const purgeOf =
  (cache: ResultCache, keys: KeyRing): ResultCachePurge =>
  (owner) =>
    cache.purge(owner === undefined ? undefined : (keys.cacheScopeOf(owner) ?? OPEN_SCOPE));

export function cacheRouter(purge: ResultCachePurge | undefined, org: Organization | undefined): Router {
  const router = Router();
  router.delete("/v1/cache", adminOnly("purge the result cache"), async (req, res) => {
    const { api_key_id } = parseRequest(PurgeQuery, req.query);
    let owner: string | null | undefined;
    if (api_key_id !== undefined) {
      owner = org?.ownerOf(api_key_id);
      if (owner === undefined) throw badRequest(`No API key has the id '${api_key_id}'.`, "api_key_id", "invalid_api_key_id");
    }
    if (!purge) throw cacheOff();
    res.json({ object: "result_cache.purge", api_key_id: api_key_id ?? null, deleted: await purge(owner) });
  });
  return router;
}

function registerCachePaths(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "delete",
      path: "/v1/cache",
      tags: ["Organization"],
      summary: "Forget remembered answers: all, or one key's (extension)",
      description:
        "Removes answers from the result cache (docs/cache.md): every one, or with `api_key_id` those that key's " +
        "requests read. Their next repeats compute. Admin keys only; any other query parameter is refused with a 400 naming it.",
      request: { query: PurgeQuery },
      responses: { 200: jsonResponse(Purged, "What was removed."), ...errorResponses(400, 401, 403) },
    }),
  );
}

export const cacheRoutes: RouteModule = {
  source: import.meta.url,
  router: (d) => cacheRouter(d.resultCachePurge, d.organization),
  paths: registerCachePaths,
};
