// GET /v1/models and /v1/models/{id} in OpenAI's shapes: the registry's models, by name. A name finds a model
// exactly when a batch line naming it would run: by its name, an alias, or any name at all where one model answers
// every name (the one-model form, or a models file's default_model). The object found is the model that serves the
// name (its `id` the registry's name, as batches report it); the list shows each model once, aliases never. A LoRA
// adapter names its base in `parent`, as vLLM lists adapters (`root` is the model itself: no path is shown).
// An Anthropic client (its SDK sends anthropic-version) gets Anthropic's Models API shapes on the same paths.

import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import type { ModelRegistry, ModelSpec } from "../../backends/registry.js";
import { AnthropicPageQuery, isAnthropicRequest } from "../anthropic.js";
import { ApiError, badRequest } from "../errors.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import { parseRequest } from "../http/validate.js";
import type { RouteModule } from "./route-module.js";

export interface ModelsRouteDeps {
  registry: ModelRegistry;
  /** Unix seconds: when this service started, as the models' `created`. */
  created: number;
}

const modelObject = (m: ModelSpec, created: number) => ({
  id: m.name,
  object: "model" as const,
  created,
  owned_by: m.backend.kind === "upstream" ? "upstream" : "local",
  root: m.name,
  parent: m.parent ?? null,
});

/** Anthropic's ModelInfo, for an Anthropic client (api/anthropic.ts isAnthropicRequest). */
const anthropicModel = (m: ModelSpec, created: number) => ({
  type: "model" as const,
  id: m.name,
  display_name: m.name,
  created_at: new Date(created * 1000).toISOString(),
  lifecycle: "active" as const,
  deprecated_at: null,
  retires_at: null,
});

/** Anthropic's page of the models: forward after after_id, or the page just before before_id. */
function anthropicPage(models: readonly ModelSpec[], q: z.infer<typeof AnthropicPageQuery>, created: number) {
  const at = (id: string, param: string) => {
    const i = models.findIndex((m) => m.name === id);
    if (i === -1) throw badRequest(`No model '${id}' to page from.`, param);
    return i;
  };
  // [from, to): the `limit` models just before before_id, or from just after after_id.
  const to = q.before_id !== undefined ? at(q.before_id, "before_id") : models.length;
  const from = q.before_id !== undefined ? Math.max(0, to - q.limit) : q.after_id === undefined ? 0 : at(q.after_id, "after_id") + 1;
  const page = models.slice(from, Math.min(to, from + q.limit));
  const data = page.map((m) => anthropicModel(m, created));
  const has_more = q.before_id !== undefined ? from > 0 : from + page.length < models.length;
  return { data, has_more, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
}

export function modelsRouter(deps: ModelsRouteDeps): Router {
  const router = Router();
  router.get("/v1/models", (req, res) => {
    if (isAnthropicRequest(req)) res.json(anthropicPage(deps.registry.models, parseRequest(AnthropicPageQuery, req.query), deps.created));
    else res.json({ object: "list", data: deps.registry.models.map((m) => modelObject(m, deps.created)) });
  });
  // Model ids such as Qwen/Qwen2.5-0.5B-Instruct hold a slash: the wildcard takes every segment.
  router.get("/v1/models/*model", (req, res) => {
    const segments = (req.params as { model: string | string[] }).model;
    const id = Array.isArray(segments) ? segments.join("/") : segments;
    const m = deps.registry.resolve(id);
    if (!m) {
      throw new ApiError(
        404,
        `The model '${id}' does not exist; the models served are: ${deps.registry.models.map((x) => x.name).join(", ")}.`,
        "invalid_request_error",
        "model_not_found",
        "model",
      );
    }
    res.json(isAnthropicRequest(req) ? anthropicModel(m, deps.created) : modelObject(m, deps.created));
  });
  return router;
}

// --- OpenAPI ---

const ModelSchema = z
  .object({
    id: z.string().openapi({ example: "stories" }),
    object: z.literal("model"),
    created: z.number().int(),
    owned_by: z.string().openapi({ description: "`local` (a GGUF in this service) or `upstream` (an OpenAI-compatible server)." }),
    root: z.string().openapi({ description: "Extension, as vLLM: the model itself (its id)." }),
    parent: z
      .string()
      .nullable()
      .openapi({ description: "Extension, as vLLM: a LoRA adapter's base model (its id); null for any other model.", example: null }),
  })
  .openapi("Model");

export function registerModelsPaths(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/models",
      tags: ["Models"],
      summary: "List the models a batch line may name (MODELS_FILE, or the one model)",
      description:
        "OpenAI's list. A request with an `anthropic-version` header (Anthropic's SDK) gets Anthropic's Models API page instead: `{data: [ModelInfo], has_more, first_id, last_id}`, paged by `after_id`, `before_id` and `limit` (1-1000).",
      responses: {
        200: jsonResponse(z.object({ object: z.literal("list"), data: z.array(ModelSchema) }).openapi("ModelList"), "The models."),
        ...errorResponses(401),
      },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/models/{model}",
      tags: ["Models"],
      summary: "Retrieve a model by its name or an alias (names may hold slashes)",
      description:
        "OpenAI's Model; with an `anthropic-version` header, Anthropic's ModelInfo (`type: model`, `display_name`, `created_at`).",
      request: { params: z.object({ model: z.string().openapi({ example: "Qwen/Qwen2.5-0.5B-Instruct" }) }) },
      responses: { 200: jsonResponse(ModelSchema, "The model."), ...errorResponses(401, 404) },
    }),
  );
}

export const modelsRoutes: RouteModule = {
  source: import.meta.url,
  router: (d) => modelsRouter({ registry: d.registry, created: Math.floor(Date.now() / 1000) }),
  paths: registerModelsPaths,
};
