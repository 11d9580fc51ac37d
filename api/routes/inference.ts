// The synchronous endpoints: POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, Anthropic's
// /v1/messages, and /v1/rerank and /v1/score, each answered on the connection as OpenAI (or Anthropic) answers it,
// by the same validation and models as a batch line of that endpoint. `service_tier: "flex"` waits with the batches;
// anything else runs in the interactive lane (domain/sync-inference.ts). A client that goes away frees its work.
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import type { SyncInference } from "../../domain/sync-inference.js";
import { ENDPOINTS, type Endpoint } from "../../openai/backend.js";
import { ownerFrom } from "../http/auth.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import type { RouteModule } from "./route-module.js";

export interface InferenceRouteDeps {
  inference: SyncInference;
}

export function inferenceRouter(deps: InferenceRouteDeps): Router {
  const router = Router();
  for (const endpoint of ENDPOINTS) {
    router.post(endpoint, async (req, res) => {
      const gone = new AbortController();
      // "close" on the response before it is finished: the client went away while its request ran.
      res.on("close", () => {
        if (!res.writableFinished) gone.abort(new Error("the client closed the connection"));
      });
      const answer = await deps.inference.run({ owner: ownerFrom(res), endpoint, body: req.body, signal: gone.signal });
      if (!gone.signal.aborted) res.json(answer.body);
    });
  }
  return router;
}

const SUMMARY: Record<Endpoint, string> = {
  "/v1/responses": "Create a response",
  "/v1/chat/completions": "Create a chat completion",
  "/v1/completions": "Create a completion",
  "/v1/embeddings": "Create embeddings",
  "/v1/messages": "Create a message (Anthropic)",
  "/v1/rerank": "Rerank documents",
  "/v1/score": "Score text pairs",
};

const Body = z.record(z.string(), z.unknown());

function registerInferencePaths(r: OpenAPIRegistry): void {
  for (const endpoint of ENDPOINTS) {
    r.registerPath(
      keyedRoute({
        method: "post",
        path: endpoint,
        tags: ["Inference"],
        summary: SUMMARY[endpoint],
        description:
          'The body a batch line of this endpoint carries, answered at once. `service_tier: "flex"` waits with the batches ' +
          "(429 `resource_unavailable` with Retry-After when its queue is full); any other tier runs in the interactive lane, " +
          "ahead of waiting batch work, within `INTERACTIVE_MAX_SHARE` of the model's sequences. The answer names its " +
          "`service_tier` (Anthropic's: `usage.service_tier`). `stream: true` is refused (400, param `stream`).",
        request: { body: { required: true, content: { "application/json": { schema: Body } } } },
        responses: {
          200: jsonResponse(Body, "The endpoint's response body, as OpenAI (or Anthropic) answers it."),
          ...errorResponses(400, 401, 404, 429, 503),
        },
      }),
    );
  }
}

export const inferenceRoutes: RouteModule = {
  router: (deps) => (deps.inference ? inferenceRouter({ inference: deps.inference }) : undefined),
  paths: registerInferencePaths,
};
