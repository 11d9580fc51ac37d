// Liveness, readiness and the service banner: open to everyone and cheap. Readiness asks the state and the blob
// store whether they answer, at most once a second whatever the request rate.

import type { OpenAPIRegistry, RouteConfig } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import type { BackendInfo } from "../../openai/backend.js";
import { modelNotReady, shuttingDown, storageNotWritable } from "../errors.js";
import { errorResponses, jsonResponse, openRoute } from "../http/openapi-paths.js";

export interface SystemRouteDeps {
  service: { name: string; version: string };
  backendInfo: () => BackendInfo | null;
  /** Resolves while what the service keeps its state in answers; throws the domain's reason when it does not. */
  reachable?: () => Promise<void>;
  /** True while a SIGTERM's drain runs (then /ready answers 503). */
  draining?: () => boolean;
  /** The disk under BATCH_DIR (`ok`, or `full` / `read_only` while only reads are served). */
  storage?: () => string;
  /** Every model of the registry and its state. */
  models?: () => Array<{ name: string; kind: string; state: string; batches: number }>;
  /** The status page's HTML, sent to a client that prefers text/html (a browser). */
  statusPage?: string;
}

const PROBE_MS = 1_000;

export function systemRouter(deps: SystemRouteDeps): Router {
  const router = Router();
  let probe: { at: number; result: Promise<void> } | undefined;
  const reachable = () => {
    if (!deps.reachable) return Promise.resolve();
    if (!probe || Date.now() - probe.at >= PROBE_MS) probe = { at: Date.now(), result: deps.reachable() };
    return probe.result;
  };

  // curl (Accept: */*) and SDKs prefer JSON; a browser gets the status page.
  router.get("/", (req, res) => {
    res.vary("Accept");
    if (deps.statusPage && req.accepts(["json", "html"]) === "html") {
      res.type("html").setHeader("cache-control", "no-store");
      res.send(deps.statusPage);
      return;
    }
    res.json({ status: "ok", service: deps.service.name, version: deps.service.version, docs: "/docs" });
  });

  // The process answers: nothing more is checked, so an orchestrator restarts only a dead process.
  router.get("/health", (_req, res) => {
    res.json({ status: "ok" });
  });

  // Ready once the backend is up (the model loaded), while the disk takes writes and while the database and the
  // blob store answer; a load balancer should send no work before that, nor during an outage (503 with the reason
  // and Retry-After). A probe reads only the status, so a full disk is a 503 too; the body keeps `storage.state`.
  // The route is open, so the backend's settings carry no path or secret.
  router.get("/ready", async (_req, res) => {
    if (deps.draining?.()) throw shuttingDown();
    const info = deps.backendInfo();
    if (!info) throw modelNotReady();
    const storage = deps.storage?.() ?? "ok";
    if (storage === "full" || storage === "read_only") {
      const refusal = storageNotWritable(storage);
      res
        .set(refusal.headers)
        .status(refusal.status)
        .json({ ...refusal.toBody(), storage: { state: storage } });
      return;
    }
    await reachable();
    res.json({
      status: "ready",
      model: info.model,
      backend: {
        kind: info.kind,
        endpoints: info.endpoints,
        concurrency: info.concurrency,
        generated_model: info.generatedModel,
        settings: info.settings,
      },
      models: (deps.models?.() ?? []).map(({ name, kind, state, batches }) => ({ name, kind, state, batches })),
      storage: { state: storage },
    });
  });

  return router;
}

// --- OpenAPI ---

const BackendSchema = z
  .object({
    kind: z.string().openapi({ description: 'Where requests run: "local" (the embedded engine).' }),
    endpoints: z.array(z.string()).openapi({ description: "The batch endpoints this deployment serves." }),
    concurrency: z.number().int().openapi({ description: "Requests the service keeps in flight toward the backend." }),
    generated_model: z.boolean().openapi({ description: "True when serving the project's own random-weights model." }),
    settings: z.record(z.string(), z.unknown()).openapi({
      description: "The backend's own settings (for the local engine: threads, sequences, chat template…); no path or secret.",
    }),
  })
  .openapi("Backend");

const ReadySchema = z
  .object({
    status: z.literal("ready"),
    model: z
      .string()
      .openapi({ description: "The primary model (the default one, else the first of the models file): up from the start." }),
    backend: BackendSchema,
    models: z
      .array(
        z.object({
          name: z.string(),
          kind: z.enum(["local", "upstream"]),
          state: z.enum(["unloaded", "loading", "loaded"]),
          batches: z.number().int().openapi({ description: "Batches using it now." }),
        }),
      )
      .openapi({ description: "Every model of the registry and whether it is up; local ones load when a batch needs them." }),
    storage: z.object({ state: z.literal("ok") }).openapi({
      description:
        "The disk under BATCH_DIR takes writes. While it is `full` (writes answer 507) or `read_only` (503), /ready answers 503 `storage_not_writable` with `storage.state` beside the error, and the service serves reads until the disk takes writes again.",
    }),
  })
  .openapi("Ready");
const HealthSchema = z
  .object({
    status: z.enum(["ok", "starting"]).openapi({
      description: "`starting` while the process downloads or loads its model (it holds its port already), `ok` after.",
    }),
  })
  .openapi("Health", { example: { status: "ok" } });
const RootSchema = z
  .object({ status: z.literal("ok"), service: z.string(), version: z.string(), docs: z.string() })
  .openapi("ServiceInfo", { example: { status: "ok", service: "offline-batch-inference", version: "0.1.0", docs: "/docs" } });

/** The open routes' documented paths, with their file, as the keyed route modules give theirs. */
export const systemPaths = { source: import.meta.url, paths: (r: OpenAPIRegistry) => registerSystemPaths(r) };

function registerSystemPaths(r: OpenAPIRegistry): void {
  const system = (path: string, summary: string, responses: RouteConfig["responses"]) =>
    r.registerPath(openRoute({ method: "get", path, tags: ["System"], summary, responses }));
  system("/", "Service name and version, or the status page for a browser", {
    200: {
      description: "JSON for API clients; the live status page (queue, pools, batches) when the client prefers text/html.",
      content: { "application/json": { schema: RootSchema }, "text/html": { schema: { type: "string" } } },
    },
  });
  system("/health", "Liveness: the process is up", {
    200: jsonResponse(HealthSchema, "Up, from the process's first second (while it starts as well)."),
  });
  system("/ready", "Readiness: the model is loaded and the disk takes writes", {
    200: jsonResponse(ReadySchema, "Ready, with the backend's settings."),
    ...errorResponses(503),
    503: {
      ...errorResponses(503)["503"],
      description:
        'Not ready (see Retry-After): the process is starting (`starting`, with `status: "starting"` and each model download\'s `state`, `bytes`, `total_bytes`, `bytes_per_second` and `eta_seconds` in `downloads` beside the error, the progress bar as its message), a drain runs, the disk under BATCH_DIR is full or read-only (`storage_not_writable`, with `storage.state` beside the error), or the database or the blob store does not answer.',
    },
  });
  system("/openapi.json", "This document", {
    200: { description: "OpenAPI 3.1 document.", content: { "application/json": { schema: { type: "object" } } } },
  });
  system("/docs", "Swagger UI for this document", {
    200: { description: "HTML page.", content: { "text/html": { schema: { type: "string" } } } },
  });
}
