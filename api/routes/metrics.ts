// GET /metrics: Prometheus text format, open like /health so a scraper needs no API key (counts and timings; no
// ids, prompts or keys); each key's series (its id, its tokens) go only to a scrape that presents an admin key.
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import type { ApiKey } from "../../config/keys.js";
import type { Metrics } from "../../metrics/metrics.js";
import { unauthorized } from "../errors.js";
import { keyMatcher } from "../http/auth.js";
import { openRoute } from "../http/openapi-paths.js";

/**
 * `keys`: who may read each key's series, as on the API: an admin key (with none configured, anyone, the API being
 * open). Without a key the scrape has everything else; a key that is not one of them is a 401, as on the API.
 */
export function metricsRouter(metrics: Metrics, keys: readonly (ApiKey | string)[] = []): Router {
  const router = Router();
  const keyOf = keyMatcher(keys);
  router.get("/metrics", async (req, res, next) => {
    const key = keys.length === 0 ? null : keyOf(req);
    if (key === undefined) return next(unauthorized(true));
    const tenants = keys.length === 0 || key?.admin === true;
    res.setHeader("content-type", metrics.registry.contentType);
    res.setHeader("cache-control", "no-store");
    res.send((await metrics.registry.metrics()) + (tenants ? await metrics.tenants.metrics() : ""));
  });
  return router;
}

/** Its documented path, beside the handler. */
export const metricsPaths = {
  source: import.meta.url,
  paths(r: OpenAPIRegistry): void {
    r.registerPath(
      openRoute({
        method: "get",
        path: "/metrics",
        tags: ["System"],
        summary: "Prometheus metrics",
        description:
          "Open, as a scraper expects. Each key's series (`obi_key_tokens_total`, `obi_key_enqueued_tokens`, labelled by the " +
          "key's id) are in the answer only for a scrape that presents an admin key (`Authorization: Bearer <key>`), or where " +
          "no keys are configured; a key that is not one of the service's is a 401.",
        responses: {
          200: { description: "Prometheus text exposition format 0.0.4.", content: { "text/plain": { schema: { type: "string" } } } },
          401: { description: "A key that is not one of the service's.", content: { "application/json": { schema: { type: "object" } } } },
        },
      }),
    );
  },
};
