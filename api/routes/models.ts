// GET /v1/models and /v1/models/{id} in OpenAI's shapes: the registry's models, by name. An alias finds its
// model (whose `id` is the registry's name). In the one-model form any name is served by the one model, but
// only its name and aliases are listed or found here.
import { Router } from "express";
import type { ModelRegistry, ModelSpec } from "../../backends/registry.js";
import { ApiError } from "../errors.js";

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
    const m = deps.registry.models.find((x) => x.name === id || x.aliases.includes(id));
    if (!m) {
      throw new ApiError(
        404,
        `The model '${id}' does not exist; the models served are: ${deps.registry.names.join(", ")}.`,
        "invalid_request_error",
        "model_not_found",
        "model",
      );
    }
    res.json(modelObject(m, deps.created));
  });
  return router;
}
