// GET /v1/models and /v1/models/{id} in OpenAI's shapes: the registry's models, by name. A name finds a model
// exactly when a batch line naming it would run: by its name, an alias, or any name at all where one model answers
// every name (the one-model form, or a models file's default_model). The object found is the model that serves the
// name (its `id` the registry's name, as batches report it); the list shows each model once, aliases never.

import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import type { ModelRegistry, ModelSpec } from "../../backends/registry.js";
import { ApiError } from "../errors.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";

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
});

export function modelsRouter(deps: ModelsRouteDeps): Router {
  const router = Router();
  router.get("/v1/models", (_req, res) => {
    res.json({ object: "list", data: deps.registry.models.map((m) => modelObject(m, deps.created)) });
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
    res.json(modelObject(m, deps.created));
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
  })
  .openapi("Model");

export function registerModelsPaths(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/models",
      tags: ["Models"],
      summary: "List the models a batch line may name (MODELS_FILE, or the one model)",
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
      request: { params: z.object({ model: z.string().openapi({ example: "Qwen/Qwen2.5-0.5B-Instruct" }) }) },
      responses: { 200: jsonResponse(ModelSchema, "The model."), ...errorResponses(401, 404) },
    }),
  );
}
