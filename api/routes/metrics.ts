// GET /metrics: Prometheus text format, open like /health so a scraper needs no API key
// (the values are counts and timings; no ids, prompts or keys).
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import type { Metrics } from "../../metrics/metrics.js";
import { openRoute } from "../http/openapi-paths.js";

export function metricsRouter(metrics: Metrics): Router {
  const router = Router();
  router.get("/metrics", async (_req, res) => {
    res.setHeader("content-type", metrics.registry.contentType);
    res.send(await metrics.registry.metrics());
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
        responses: {
          200: { description: "Prometheus text exposition format 0.0.4.", content: { "text/plain": { schema: { type: "string" } } } },
        },
      }),
    );
  },
};
