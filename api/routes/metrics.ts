// GET /metrics: Prometheus text format, open like /health so a scraper needs no API key
// (the values are counts and timings; no ids, prompts or keys).
import { Router } from "express";
import type { Metrics } from "../../metrics/metrics.js";

export function metricsRouter(metrics: Metrics): Router {
  const router = Router();
  router.get("/metrics", async (_req, res) => {
    res.setHeader("content-type", metrics.registry.contentType);
    res.send(await metrics.registry.metrics());
  });
  return router;
}
