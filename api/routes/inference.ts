// The synchronous endpoints: POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, Anthropic's
// /v1/messages, and /v1/rerank and /v1/score, each answered on the connection as OpenAI (or Anthropic) answers it,
// by the same validation and models as a batch line of that endpoint. `service_tier: "flex"` waits with the batches;
// anything else runs in the interactive lane (domain/sync-inference.ts). A client that goes away frees its work.
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { type Response, Router } from "express";
import { z } from "zod";
import { STREAMED, type SyncInference, type SyncRequest, type SyncStream } from "../../domain/sync-inference.js";
import { ENDPOINTS, type Endpoint } from "../../openai/backend.js";
import { hexId } from "../../openai/ids.js";
import { type ChunkStream, chunkStream, type StreamedEndpoint } from "../../openai/stream-chunks.js";
import { internalError } from "../errors.js";
import { ownerFrom } from "../http/auth.js";
import { toApiError } from "../http/error-handler.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import { SseWriter } from "../http/sse.js";
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
      const request = { owner: ownerFrom(res), endpoint, body: req.body, signal: gone.signal };
      if (req.body?.stream === true && isStreamed(endpoint)) return streamed(deps, { ...request, endpoint }, res);
      const answer = await deps.inference.run(request);
      if (!gone.signal.aborted) res.json(answer.body);
    });
  }
  return router;
}

const isStreamed = (e: Endpoint): e is StreamedEndpoint => STREAMED.includes(e);

/** A streamed chat or completion: chunks as the backend tells the answer, the closing ones from its final body. */
async function streamed(
  deps: InferenceRouteDeps,
  request: Omit<SyncRequest, "stream"> & { endpoint: StreamedEndpoint },
  res: Response,
): Promise<void> {
  const sse = new SseWriter(res);
  const includeUsage = (request.body as { stream_options?: { include_usage?: boolean } }).stream_options?.include_usage === true;
  let chunks: ChunkStream | undefined;
  const stream: SyncStream = {
    begin: ({ model, tier }) => {
      const id = `${request.endpoint === "/v1/chat/completions" ? "chatcmpl" : "cmpl"}-${hexId()}`;
      chunks = chunkStream(request.endpoint, { id, created: Math.floor(Date.now() / 1000), model, serviceTier: tier, includeUsage });
    },
    text: (index, text) => sse.send(chunks!.text(index, text)),
  };
  try {
    const answer = await deps.inference.run({ ...request, stream });
    for (const chunk of chunks!.end(answer.body)) sse.send(chunk);
    sse.done();
  } catch (err) {
    // Before the first event the refusal is an ordinary answer; after it, the stream's last event.
    if (!sse.started) throw err;
    if (!request.signal.aborted) sse.fail(toApiError(err, { maxFileBytes: 0 }) ?? internalError());
  }
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
          "`service_tier` (Anthropic's: `usage.service_tier`). Chat and completions stream with `stream: true` " +
          "(Server-Sent Events of chunks, `stream_options.include_usage`, then `[DONE]`); the other endpoints refuse it (400, param `stream`).",
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
