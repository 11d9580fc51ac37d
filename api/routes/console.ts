// The console at / (api/console/): its script, the charting library it draws with (uPlot, served from our own
// origin, never a CDN), the icon, and the JSON it reads. The JSON sits behind the API key like /v1: a key sees its
// own batches, the counts stay global.
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import { unixNow } from "../../domain/clock.js";
import { BATCH_STATUSES } from "../../domain/objects.js";
import type { BatchService, BatchViews, ControlPlaneStatus } from "../../domain/ports.js";
import type { LaneView } from "../../domain/sync-inference.js";
import type { Organization } from "../../domain/usage.js";
import type { SeriesPoint } from "../../metrics/series.js";
import type { BackendInfo, BackendStats } from "../../openai/backend.js";
import { notFound } from "../errors.js";
import { ownerFrom, readScope } from "../http/auth.js";
import { errorResponses, keyedRoute, openRoute } from "../http/openapi-paths.js";
import { parseId, parseRequest } from "../http/validate.js";
import { BATCH_ID_PATTERN, BatchIdParams, queryInt, queryObject } from "../schemas/requests.js";
import type { RouteModule } from "./route-module.js";
import { poolsVisibleTo } from "./status.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const CONSOLE_DIR = path.join(here, "../console");
const uplot = (file: string) => createRequire(import.meta.url).resolve(`uplot/dist/${file}`);

/** The console's own scripts: the entry console.js and the ES modules it imports, each served at /<name>. */
const SCRIPTS = readdirSync(CONSOLE_DIR).filter((f) => f.endsWith(".js"));

/** The files the console is made of, read once at start: name, content type, path. */
const ASSETS: Array<[string, string, string]> = [
  ...SCRIPTS.map((f): [string, string, string] => [`/${f}`, "text/javascript; charset=utf-8", path.join(CONSOLE_DIR, f)]),
  ["/console.css", "text/css; charset=utf-8", path.join(CONSOLE_DIR, "console.css")],
  ["/assets/uplot.js", "text/javascript; charset=utf-8", uplot("uPlot.iife.min.js")],
  ["/assets/uplot.css", "text/css; charset=utf-8", uplot("uPlot.min.css")],
  ["/favicon.ico", "image/svg+xml", path.join(CONSOLE_DIR, "favicon.svg")],
];

/** The page systemRouter sends a browser at GET /. */
export function readConsolePage(): string {
  return readFileSync(path.join(CONSOLE_DIR, "console.html"), "utf8");
}

export interface ConsoleDeps {
  service: { name: string; version: string };
  batches: BatchService;
  /** The console's views: a batch inspected, a search. */
  views: BatchViews;
  status: ControlPlaneStatus;
  backendInfo: () => BackendInfo | null;
  models?: () => Array<{ name: string; kind: string; state: string; batches: number; bytes?: number }>;
  upstreams?: () => Array<{ model: string; stats: BackendStats }>;
  series?: () => SeriesPoint[];
  seriesIntervalSeconds?: number;
  /** The synchronous requests' lanes (none where this process serves no model). */
  lanes?: () => LaneView[];
  /** Admin keys see every key's batches through it. */
  organization?: Pick<Organization, "ownerOf">;
}

export const ConsoleBatchesQuery = queryObject({
  status: z.enum(BATCH_STATUSES, { error: `status must be one of ${BATCH_STATUSES.join(", ")}` }).optional(),
  model: z.string().max(256).optional(),
  q: z.string().max(256).optional(),
  after: z.string().regex(BATCH_ID_PATTERN, "after must be a batch id").optional(),
  limit: queryInt("limit", { min: 1, max: 100 }).default(50).openapi({ default: 50 }),
  /** An admin key's filter: this key's batches only (an admin's list holds every key's). */
  api_key_id: z.string().min(1).max(64).optional(),
});

/** The console's static files: open, since a browser fetches them before it has asked for a key. */
export function consoleAssetsRouter(): Router {
  const router = Router();
  for (const [route, type, file] of ASSETS) {
    const body = readFileSync(file);
    router.get(route, (_req, res) => {
      res.setHeader("content-type", type);
      res.setHeader("cache-control", "no-cache");
      res.send(body);
    });
  }
  return router;
}

export function consoleApiRouter(deps: ConsoleDeps): Router {
  const router = Router();
  router.use("/console/api", (_req, res, next) => {
    res.setHeader("cache-control", "no-store");
    next();
  });
  router.get("/console/api/overview", async (_req, res) => {
    const scope = readScope(res, undefined, deps.organization);
    res.json({
      service: deps.service,
      model: deps.backendInfo()?.model ?? null,
      now: unixNow(),
      queue: await deps.status.queueStats(),
      pools: await poolsVisibleTo(deps.status, deps.batches, scope),
      models: deps.models?.() ?? [],
      upstreams: (deps.upstreams?.() ?? []).map(({ model, stats }) => ({
        model,
        in_flight: stats.inFlight,
        limit: stats.limit,
        waiting: stats.waiting,
        latency_ms: Math.round(stats.latencyMs),
        requests: stats.requests,
        retries: stats.retries,
        errors: stats.errors,
      })),
      lanes: deps.lanes?.() ?? [],
    });
  });
  router.get("/console/api/batches", async (req, res) => {
    const q = parseRequest(ConsoleBatchesQuery, req.query);
    const page = await deps.views.search({
      status: q.status,
      model: q.model,
      text: q.q,
      after: q.after,
      limit: q.limit,
      owner: readScope(res, q.api_key_id, deps.organization),
    });
    res.json({ object: "list", data: page.data, has_more: page.has_more, last_id: page.data.at(-1)?.id ?? null });
  });
  router.get("/console/api/batches/:batch_id", async (req, res) => {
    const id = parseId("batch", BATCH_ID_PATTERN, req.params.batch_id);
    const found = await deps.views.inspect(id, readScope(res, undefined, deps.organization));
    if (!found) throw notFound("batch", id);
    // An admin reads every key's batches, but cancels, retries and downloads the files of its own only: the page
    // offers what this key can do.
    const own = (await deps.batches.get(id, ownerFrom(res))) !== undefined;
    res.json({ ...found, own });
  });
  router.get("/console/api/series", (_req, res) => {
    res.json({ interval_seconds: deps.seriesIntervalSeconds ?? 5, points: deps.series?.() ?? [] });
  });
  return router;
}

// --- OpenAPI ---

export function registerConsolePaths(r: OpenAPIRegistry): void {
  const page = (route: string, summary: string) =>
    r.registerPath(
      keyedRoute({
        method: "get",
        path: route,
        tags: ["Console"],
        summary,
        responses: {
          200: { description: "JSON for the console.", content: { "application/json": { schema: { type: "object" } } } },
          ...errorResponses(401),
        },
      }),
    );
  page("/console/api/overview", "The console's overview: queue, pools, models, upstreams and the synchronous lanes");
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/console/api/batches",
      tags: ["Console"],
      summary: "Batches filtered by status and model and searched by id, input file name or metadata, newest first",
      request: { query: ConsoleBatchesQuery },
      responses: {
        200: {
          description: "A page of batches with their input file's name.",
          content: { "application/json": { schema: { type: "object" } } },
        },
        ...errorResponses(400, 401),
      },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/console/api/batches/{batch_id}",
      tags: ["Console"],
      summary: "One batch with its shards and workers, webhook delivery and first failed lines",
      request: { params: BatchIdParams },
      responses: {
        200: { description: "The batch's page data.", content: { "application/json": { schema: { type: "object" } } } },
        ...errorResponses(401, 404),
      },
    }),
  );
  page("/console/api/series", "The live charts' last 15 minutes: tokens/s, requests/s, queue depth, pool occupancy");
  for (const [route] of ASSETS)
    r.registerPath(
      openRoute({
        method: "get",
        path: route,
        tags: ["Console"],
        summary: "A file of the console",
        responses: { 200: { description: "The file.", content: { "*/*": { schema: { type: "string" } } } } },
      }),
    );
}

export const consoleRoutes: RouteModule = {
  source: import.meta.url,
  router: (d) =>
    consoleApiRouter({
      service: d.service,
      batches: d.batches,
      views: d.views,
      organization: d.organization,
      status: d.status,
      backendInfo: d.backendInfo,
      models: d.modelStatus,
      upstreams: d.upstreams,
      series: d.series,
      lanes: d.inference?.lanes ? () => d.inference!.lanes!() : undefined,
    }),
  paths: registerConsolePaths,
};
