// Liveness, readiness and the service banner: open to everyone and cheap. Readiness asks the state and the blob
// store whether they answer, at most once a second whatever the request rate.

import type { OpenAPIRegistry, RouteConfig } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import type { BackendInfo } from "../../openai/backend.js";
import { modelNotReady, shuttingDown } from "../errors.js";
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

  // Ready once the backend is up (the model loaded) and while the database and the blob store answer; a load
  // balancer should send no work before that, nor during an outage (503 with the reason and Retry-After).
  // The route is open, so the backend's settings carry no path or secret.
  router.get("/ready", async (_req, res) => {
    if (deps.draining?.()) throw shuttingDown();
    const info = deps.backendInfo();
    if (!info) throw modelNotReady();
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
      storage: { state: deps.storage?.() ?? "ok" },
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
    storage: z.object({ state: z.enum(["ok", "full", "read_only"]) }).openapi({
      description:
        "The disk under BATCH_DIR. `full` (writes answer 507) or `read_only` (503): the service serves reads until the disk takes writes again.",
    }),
  })
  .openapi("Ready");
const HealthSchema = z.object({ status: z.literal("ok") }).openapi("Health", { example: { status: "ok" } });
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
  system("/health", "Liveness: the process is up", { 200: jsonResponse(HealthSchema, "Up.") });
  system("/ready", "Readiness: the model is loaded", {
    200: jsonResponse(ReadySchema, "Ready, with the backend's settings."),
    ...errorResponses(503),
  });
  system("/openapi.json", "This document", {
    200: { description: "OpenAPI 3.1 document.", content: { "application/json": { schema: { type: "object" } } } },
  });
  system("/docs", "Swagger UI for this document", {
    200: { description: "HTML page.", content: { "text/html": { schema: { type: "string" } } } },
  });
}
