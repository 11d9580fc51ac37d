// The Express app: middleware order, route mounting, errors. No listening here (app/main.ts does that).
import express from "express";
import { ENDPOINTS } from "../../openai/backend.js";
import { lazyOpenApiDocument, openApiRegistry, registeredRoutes } from "../openapi.js";
import { consoleAssetsRouter, readConsolePage } from "../routes/console.js";
import { KEYED_ROUTES } from "../routes/index.js";
import { metricsRouter } from "../routes/metrics.js";
import { inferenceRouter } from "../routes/sync.js";
import { systemRouter } from "../routes/system.js";
import type { AppDeps } from "./app-deps.js";
import { requireApiKey } from "./auth.js";
import { requireBodyType, takesFiles } from "./body-types.js";
import { crossSiteGuard, loopbackOnly, noFraming, rebindingGuard } from "./cross-site.js";
import { docsRouter } from "./docs.js";
import { errorHandler, unknownRoute } from "./error-handler.js";
import { httpMetrics } from "./http-metrics.js";
import { boundedNesting } from "./nesting.js";
import { requestLogger } from "./request-log.js";
import { readServiceInfo } from "./service-info.js";

/** Batch creation's JSON (the inline form carries its prompts) is buffered whole; big inputs belong in a file upload. */
const MAX_JSON_BODY_BYTES = 16 * 1024 * 1024;
/** Every other route takes a small body or none. */
const SMALL_JSON_BODY_BYTES = 64 * 1024;

export function createApp(deps: AppDeps): express.Express {
  const { config } = deps;
  const service = readServiceInfo();
  // The examples name the model a request gets by default here, so Swagger UI's "Try it out" runs them as they are.
  const model = deps.registry.resolve(undefined)?.name ?? deps.registry.models[0]?.name;
  const registry = openApiRegistry({ model });
  const document = lazyOpenApiDocument(registry, service.version);
  const app = express();
  app.disable("x-powered-by");

  app.use(requestLogger(deps.logger));
  if (deps.metrics) app.use(httpMetrics(deps.metrics));
  // First of all, so that a page of another site changes nothing whatever the route, and is told so.
  const rebinding = rebindingGuard(config.keys.length === 0 && loopbackOnly(config.host), config.corsOrigins);
  app.use(noFraming, rebinding, crossSiteGuard(config.corsOrigins));

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
  app.use(docsRouter(document));
  app.use(consoleAssetsRouter());
  if (deps.metrics) app.use(metricsRouter(deps.metrics, config.keys));

  // The key is checked before any body is read, so an unauthenticated body is never buffered or parsed; then its
  // type, so that only JSON is parsed (and multipart only reaches the routes that take files).
  const auth = requireApiKey(config.keys);
  const bodyType = requireBodyType(takesFiles(registeredRoutes(registry)));
  const json = (limit: number) => express.json({ limit });
  const createBody = json(Math.min(config.maxFileBytes, MAX_JSON_BODY_BYTES));
  // A synchronous request is validated and run as a batch line of its endpoint, and takes what one may hold.
  const syncBody = json(config.maxLineBytes);

  if (deps.api === false) {
    // A worker answers only the synchronous requests API servers send it for its models, behind the same keys.
    if (deps.inference) {
      app.use([...ENDPOINTS], auth, bodyType, syncBody, boundedNesting);
      app.use(inferenceRouter({ inference: deps.inference }));
    }
    app.use(unknownRoute);
    app.use(errorHandler({ maxFileBytes: config.maxFileBytes, onStorageFault: deps.storageFault }));
    return app;
  }

  app.use(["/v1", "/queue", "/pools", "/status.json", "/console/api"], auth, bodyType);
  const smallBody = json(SMALL_JSON_BODY_BYTES);
  const creates = new Set(["/v1/batches", "/v1/messages/batches"]);
  const sync = new Set<string>(ENDPOINTS);
  const bodyFor = (req: express.Request) =>
    req.method !== "POST" ? smallBody : creates.has(req.path) ? createBody : sync.has(req.path) ? syncBody : smallBody;
  app.use((req, res, next) => bodyFor(req)(req, res, next), boundedNesting);
  for (const routes of KEYED_ROUTES) {
    const router = routes.router({ ...deps, service });
    if (router) app.use(router);
  }

  app.use(unknownRoute);
  app.use(errorHandler({ maxFileBytes: config.maxFileBytes, onStorageFault: deps.storageFault }));
  return app;
}
