// Counts and times every HTTP request for /metrics. The route label is the matched route pattern
// (/v1/batches/:batch_id), never the raw path, so ids cannot blow up the label set.
import type { NextFunction, Request, Response } from "express";
import type { Metrics } from "../../metrics/metrics.js";

export function httpMetrics(metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction) => {
    const start = process.hrtime.bigint();
    res.on("finish", () => {
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      metrics.observeHttp({ method: req.method, route: routeLabel(req, res), code: res.statusCode }, seconds);
    });
    next();
  };
}

function routeLabel(req: Request, res: Response): string {
  const pattern = (req.route as { path?: unknown } | undefined)?.path;
  if (typeof pattern === "string") return `${req.baseUrl}${pattern}`;
  // Static pages (Swagger UI's assets) and unknown paths: one label each.
  if (req.originalUrl.startsWith("/docs")) return "/docs";
  return res.statusCode === 404 ? "unmatched" : "other";
}
