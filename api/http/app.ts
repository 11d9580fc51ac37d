// The Express app: middleware order, route mounting, errors. No listening here (app/main.ts does that).
import express from "express";
import { ENDPOINTS } from "../../openai/backend.js";
import { buildOpenApiDocument } from "../openapi.js";
import { consoleAssetsRouter, readConsolePage } from "../routes/console.js";
import { KEYED_ROUTES } from "../routes/index.js";
import { inferenceRouter } from "../routes/inference.js";
import { metricsRouter } from "../routes/metrics.js";
import { systemRouter } from "../routes/system.js";
import type { AppDeps } from "./app-deps.js";
import { requireApiKey } from "./auth.js";
import { docsRouter } from "./docs.js";
import { errorHandler, unknownRoute } from "./error-handler.js";
import { httpMetrics } from "./http-metrics.js";
import { requestLogger } from "./request-log.js";
import { readServiceInfo } from "./service-info.js";

/** Batch creation's JSON (the inline form carries its prompts) is buffered whole; big inputs belong in a file upload. */
const MAX_JSON_BODY_BYTES = 16 * 1024 * 1024;
/** Every other route takes a small body or none. */
const SMALL_JSON_BODY_BYTES = 64 * 1024;

export function createApp(deps: AppDeps): express.Express {
  const { config } = deps;
  const service = readServiceInfo();
  const app = express();
  app.disable("x-powered-by");

  app.use(requestLogger(deps.logger));
  if (deps.metrics) app.use(httpMetrics(deps.metrics));

  // Open routes: health checks and documentation must work without a key; none of them reads a body.
  app.use(
    systemRouter({
      service,
      backendInfo: deps.backendInfo,
      reachable: deps.reachable,
      draining: deps.draining,
      storage: deps.storage,
      models: deps.modelStatus,
      statusPage: readConsolePage(),
    }),
  );
  // The examples name the model a request gets by default here, so Swagger UI's "Try it out" runs them as they are.
  const model = deps.registry.resolve(undefined)?.name ?? deps.registry.models[0]?.name;
  app.use(docsRouter(buildOpenApiDocument({ version: service.version, model })));
  app.use(consoleAssetsRouter());
  if (deps.metrics) app.use(metricsRouter(deps.metrics));

  // The key is checked before any body is read, so an unauthenticated body is never buffered or parsed.
  const auth = requireApiKey(config.keys);
  // Any non-multipart body is read as JSON: `curl -d '{...}'` without a Content-Type still works,
  // and a body that is not JSON gets a clear invalid_json error instead of "missing parameter".
  const json = (limit: number) => express.json({ limit, type: (req) => !/^multipart\//i.test(req.headers["content-type"] ?? "") });
  const createBody = json(Math.min(config.maxFileBytes, MAX_JSON_BODY_BYTES));

  if (deps.api === false) {
    // A worker answers only the synchronous requests API servers send it for its models, behind the same keys.
    if (deps.inference) {
      app.use([...ENDPOINTS], auth, createBody);
      app.use(inferenceRouter({ inference: deps.inference }));
    }
    app.use(unknownRoute);
    app.use(errorHandler({ maxFileBytes: config.maxFileBytes, onStorageFault: deps.storageFault }));
    return app;
  }

  app.use(["/v1", "/queue", "/pools", "/status.json", "/console/api"], auth);
  const smallBody = json(SMALL_JSON_BODY_BYTES);
  // A synchronous request carries its prompt as a batch line does: it gets the large limit too.
  const creates = new Set(["/v1/batches", "/v1/messages/batches", ...ENDPOINTS]);
  app.use((req, res, next) => (req.method === "POST" && creates.has(req.path) ? createBody : smallBody)(req, res, next));
  for (const routes of KEYED_ROUTES) {
    const router = routes.router({ ...deps, service });
    if (router) app.use(router);
  }

  app.use(unknownRoute);
  app.use(errorHandler({ maxFileBytes: config.maxFileBytes, onStorageFault: deps.storageFault }));
  return app;
}
