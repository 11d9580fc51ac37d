// The OpenAPI document, assembled from the paths each router registers beside its handlers (api/routes/*.ts),
// built from the same zod schemas the routes validate with; tests/api/openapi-document.int.test.ts checks the two agree.
import { OpenAPIRegistry, OpenApiGeneratorV31 } from "@asteasolutions/zod-to-openapi";
import type { DocumentedRoute } from "./http/body-types.js";
import { KEYED_ROUTES } from "./routes/index.js";
import { metricsPaths } from "./routes/metrics.js";
import { DOC_DEFAULTS, type DocContext, type RouteModule } from "./routes/route-module.js";
import { systemPaths } from "./routes/system.js";

/** Every documented route's module, in the document's order: the keyed ones, then the open ones. */
export const DOCUMENTED: readonly Pick<RouteModule, "source" | "paths">[] = [...KEYED_ROUTES, systemPaths, metricsPaths];

/** Every documented route registered with its schemas: cheap, unlike the document generated from them. */
export function openApiRegistry(opts: Partial<DocContext> = {}): OpenAPIRegistry {
  const registry = new OpenAPIRegistry();
  registry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "Only enforced when the service runs with API_KEYS; send `Authorization: Bearer <key>`.",
  });
  const ctx: DocContext = { ...DOC_DEFAULTS, ...(opts.model ? { model: opts.model } : {}) };
  for (const routes of DOCUMENTED) routes.paths(registry, ctx);
  return registry;
}

/**
 * The document of the routes a registry holds, built from their zod schemas: about a tenth of a second, so the
 * service builds it on the first request for it, not at every start (lazyOpenApiDocument).
 */
export function openApiDocumentOf(registry: OpenAPIRegistry, version?: string): object {
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: "3.1.0",
    info: {
      title: "Offline batch inference",
      version: version ?? "0.0.0",
      description:
        "An OpenAI Batch API compatible service running node-llama-cpp on a local GGUF model. " +
        "Upload a JSONL file, create a batch, poll it, download the output file; the official OpenAI clients work unchanged.",
    },
    security: [{ bearerAuth: [] }],
    tags: [
      { name: "Files", description: "OpenAI Files API (purpose=batch)." },
      { name: "Batches", description: "OpenAI Batch API." },
      {
        name: "Inline form and status",
        description: "The inline batch form, the results route and the queue and pool views: this service's own, not part of OpenAI's API.",
      },
      { name: "System", description: "Health, readiness and documentation; never need a key." },
      { name: "Console", description: "The console at / and the JSON it reads (not part of OpenAI's API)." },
    ],
  });
}

/** `model`: what the examples name, so each runs as it is on the deployment serving the document. */
export function buildOpenApiDocument(opts: { version?: string } & Partial<DocContext> = {}): object {
  return openApiDocumentOf(openApiRegistry(opts), opts.version);
}

/** The document, built once on first use. */
export function lazyOpenApiDocument(registry: OpenAPIRegistry, version?: string): () => object {
  let document: object | undefined;
  return () => (document ??= openApiDocumentOf(registry, version));
}

/** The routes a registry documents, with their request bodies' media types (what takesFiles reads). */
export function registeredRoutes(registry: OpenAPIRegistry): DocumentedRoute[] {
  return registry.definitions.flatMap((d) => (d.type === "route" ? [d.route] : []));
}
