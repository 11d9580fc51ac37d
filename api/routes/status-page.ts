// GET /status.json: the queue, the pools and the newest batches in one answer, as the first status page polled
// it (kept for scripts and dashboards that read it; the console at / reads /console/api/*).
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import { unixNow } from "../../domain/clock.js";
import type { Batch } from "../../domain/objects.js";
import { BatchSchema } from "../../domain/objects.js";
import type { BatchService, ControlPlaneStatus, Owner } from "../../domain/ports.js";
import type { BackendInfo } from "../../openai/backend.js";
import { ownerFrom } from "../http/auth.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import type { RouteModule } from "./route-module.js";
import { PoolStatusSchema, poolsVisibleTo, QueueStatsSchema } from "./status.js";

/** The page lists the newest batches, up to this many. */
export const STATUS_PAGE_MAX_BATCHES = 500;

export interface StatusPageDeps {
  service: { name: string; version: string };
  status: ControlPlaneStatus;
  batches: BatchService;
  backendInfo: () => BackendInfo | null;
}

/** GET /status.json: what the page polls. Behind the API key like /v1: a key sees its own batches. */
export function statusDataRouter(deps: StatusPageDeps): Router {
  const router = Router();
  router.get("/status.json", async (_req, res) => {
    const owner = ownerFrom(res);
    const { batches, hasMore } = await newestBatches(deps.batches, owner);
    res.setHeader("cache-control", "no-store");
    res.json({
      service: deps.service,
      model: deps.backendInfo()?.model ?? null,
      now: unixNow(),
      queue: await deps.status.queueStats(),
      pools_simulated: true,
      pools: await poolsVisibleTo(deps.status, deps.batches, owner),
      batches,
      has_more: hasMore,
    });
  });
  return router;
}

/** The owner's newest batches, up to STATUS_PAGE_MAX_BATCHES, in one list call (the page polls every second). */
async function newestBatches(service: BatchService, owner: Owner): Promise<{ batches: Batch[]; hasMore: boolean }> {
  const page = await service.list({ limit: STATUS_PAGE_MAX_BATCHES, owner });
  return { batches: page.data, hasMore: page.has_more };
}

// --- OpenAPI ---

const StatusPageDataSchema = z
  .object({
    service: z.object({ name: z.string(), version: z.string() }),
    model: z.string().nullable(),
    now: z.number().int(),
    queue: QueueStatsSchema,
    pools_simulated: z.literal(true),
    pools: z.array(PoolStatusSchema),
    batches: z.array(BatchSchema),
    has_more: z.boolean(),
  })
  .openapi("StatusPageData", {
    description: "Everything the status page at / shows: the queue, the pools and the newest batches (up to 500).",
  });

export function registerStatusPagePaths(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/status.json",
      tags: ["Operations"],
      summary: "The status page's data",
      description: "What the status page at / polls. With API keys on, a key sees its own batches; the counts stay global.",
      responses: { 200: jsonResponse(StatusPageDataSchema, "Queue, pools and batches."), ...errorResponses(401) },
    }),
  );
}

export const statusPageRoutes: RouteModule = {
  source: import.meta.url,
  router: (d) => statusDataRouter({ service: d.service, status: d.status, batches: d.batches, backendInfo: d.backendInfo }),
  paths: registerStatusPagePaths,
};
