// The OpenAPI document, assembled from the paths each router registers beside its handlers (api/routes/*.ts),
// built from the same zod schemas the routes validate with; tests/api/openapi-document.int.test.ts checks the two agree.
import { OpenAPIRegistry, OpenApiGeneratorV31 } from "@asteasolutions/zod-to-openapi";
import { KEYED_ROUTES } from "./routes/index.js";
import { metricsPaths } from "./routes/metrics.js";
import { DOC_DEFAULTS, type DocContext, type RouteModule } from "./routes/route-module.js";
import { systemPaths } from "./routes/system.js";

/** Every documented route's module, in the document's order: the keyed ones, then the open ones. */
export const DOCUMENTED: readonly Pick<RouteModule, "source" | "paths">[] = [...KEYED_ROUTES, systemPaths, metricsPaths];

/** `model`: what the examples name, so each runs as it is on the deployment serving the document. */
export function buildOpenApiDocument(opts: { version?: string } & Partial<DocContext> = {}): object {
  const registry = new OpenAPIRegistry();
  registry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "Only enforced when the service runs with API_KEYS; send `Authorization: Bearer <key>`.",
  });
  const ctx: DocContext = { ...DOC_DEFAULTS, ...(opts.model ? { model: opts.model } : {}) };
  for (const routes of DOCUMENTED) routes.paths(registry, ctx);
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: "3.1.0",
    info: {
      title: "Offline batch inference",
      version: opts.version ?? "0.0.0",
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
