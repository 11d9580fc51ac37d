// The synchronous endpoints: POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, Anthropic's
// /v1/messages, and /v1/rerank and /v1/score, each answered on the connection as OpenAI (or Anthropic) answers it,
// by the same validation and models as a batch line of that endpoint. `service_tier: "flex"` waits with the batches;
// anything else runs in the interactive lane (domain/sync-inference.ts). A client that goes away frees its work.
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { type Response, Router } from "express";
import { z } from "zod";
import { type MessageEvents, messageEvents } from "../../anthropic/message-events.js";
import { STREAMED, type SyncInference, type SyncRequest, type SyncStream, type SyncTargets } from "../../domain/sync-inference.js";
import { ENDPOINTS, type Endpoint, type TokenUsage } from "../../openai/backend.js";
import { hexId } from "../../openai/ids.js";
import { type ResponseEvents, responseEvents, responseSkeleton } from "../../openai/response-events.js";
import { type ChunkStream, chunkStream, type StreamedEndpoint } from "../../openai/stream-chunks.js";
import { anthropicErrorBody } from "../anthropic.js";
import { type ApiError, internalError } from "../errors.js";
import { ownerFrom } from "../http/auth.js";
import { toApiError } from "../http/error-handler.js";
import { forwardSync } from "../http/forward.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import { SseWriter } from "../http/sse.js";
import { syncBodySchema } from "../schemas/sync-bodies.js";
import type { DocContext, RouteModule } from "./route-module.js";

export interface InferenceRouteDeps {
  /** This process's models (ROLE=all, or a worker). */
  inference?: SyncInference;
  /** An API server's workers (ROLE=api): each request is sent on to one (api/http/forward.ts). */
  targets?: SyncTargets;
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
      if (deps.targets) return forwardSync(deps.targets, endpoint, req, res, gone.signal);
      const inference = deps.inference;
      if (!inference) throw new Error("a synchronous route with neither models nor workers");
      // Pragma is HTTP/1.0's Cache-Control, which a client may send alone (RFC 9111, 5.4).
      const noCache = /\bno-(cache|store)\b/i.test(req.get("cache-control") ?? "") || /\bno-cache\b/i.test(req.get("pragma") ?? "");
      const request = { owner: ownerFrom(res), endpoint, body: req.body, signal: gone.signal, noCache };
      if (req.body?.stream === true && isStreamed(endpoint)) {
        const format =
          endpoint === "/v1/messages"
            ? anthropicFormat()
            : endpoint === "/v1/responses"
              ? responsesFormat(req.body)
              : openaiFormat(endpoint, req.body);
        return streamed(inference, request, format, res);
      }
      const answer = await inference.run(request);
      if (!gone.signal.aborted) res.json(answer.body);
    });
  }
  return router;
}

const isStreamed = (e: Endpoint): e is StreamedEndpoint | "/v1/messages" | "/v1/responses" => STREAMED.includes(e);

type Events = Array<{ data: unknown; event?: string }>;

/** What a stream's opening events say: the model, the tier, and the prompt's tokens (Anthropic's message_start). */
interface Opening {
  model: string;
  tier: string;
  prompt: Pick<TokenUsage, "promptTokens" | "cachedTokens">;
}

/** How one API's stream is written: its events as the answer is told, then its closing events and its end. */
interface StreamFormat {
  begin(opening: Opening): Events;
  text(index: number, text: string): Events;
  end(body: Record<string, unknown>): Events;
  close(sse: SseWriter): void;
  fail(sse: SseWriter, error: ApiError, requestId: string | null): void;
}

/** OpenAI's chunks (openai/stream-chunks.ts), then `[DONE]`. */
function openaiFormat(endpoint: StreamedEndpoint, body: unknown): StreamFormat {
  const includeUsage = (body as { stream_options?: { include_usage?: boolean } }).stream_options?.include_usage === true;
  let chunks: ChunkStream | undefined;
  return {
    begin: ({ model, tier }) => {
      const id = `${endpoint === "/v1/chat/completions" ? "chatcmpl" : "cmpl"}-${hexId()}`;
      chunks = chunkStream(endpoint, { id, created: Math.floor(Date.now() / 1000), model, serviceTier: tier, includeUsage });
      return [];
    },
    text: (index, text) => [{ data: chunks!.text(index, text) }],
    end: (final) => chunks!.end(final).map((data) => ({ data })),
    close: (sse) => sse.done(),
    fail: (sse, error) => sse.fail(error),
  };
}

/** Events whose `type` names them on the wire (`event: <type>`), as the Responses API's and Anthropic's are. */
const named = (events: Array<Record<string, unknown>>) => events.map((data) => ({ data, event: String(data.type) }));

/** The Responses API's events (openai/response-events.ts); `response.completed` ends it. */
function responsesFormat(body: unknown): StreamFormat {
  let events: ResponseEvents | undefined;
  return {
    begin: ({ model }) => {
      events = responseEvents({ id: `resp_${hexId()}`, messageId: `msg_${hexId()}` });
      return named(events.start(responseSkeleton(body, model)));
    },
    text: (_index, text) => named(events!.text(text)),
    end: (final) => named(events!.end(final)),
    close: (sse) => sse.end(),
    fail: (sse, error) => sse.fail(error),
  };
}

/** Anthropic's named events (anthropic/message-events.ts); `message_stop` ends it. */
function anthropicFormat(): StreamFormat {
  let events: MessageEvents | undefined;
  return {
    begin: ({ model, prompt }) => {
      events = messageEvents({ id: `msg_${hexId()}`, model });
      return named(events.start(prompt));
    },
    text: (_index, text) => named(events!.text(text)),
    end: (final) => named(events!.end(final)),
    close: (sse) => sse.end(),
    fail: (sse, error, requestId) => sse.fail(error, anthropicErrorBody(error, requestId)),
  };
}

/** A streamed answer: events as the backend tells it, the closing ones from its final body. */
async function streamed(
  inference: SyncInference,
  request: Omit<SyncRequest, "stream">,
  format: StreamFormat,
  res: Response,
): Promise<void> {
  const sse = new SseWriter(res);
  const write = (events: Events) => {
    for (const e of events) sse.send(e.data, e.event);
  };
  // The opening events wait for the first text: a refusal before it (a prompt over the context) is then still an
  // ordinary HTTP error, as a request that does not stream gets. By then the backend has told the prompt's tokens
  // where it can; where it cannot (an upstream, a tool call) the answer's usage says them.
  let meta: Omit<Opening, "prompt"> | undefined;
  let prompt: Opening["prompt"] | undefined;
  const open = (usage?: Opening["prompt"]) => {
    if (!meta) return;
    write(format.begin({ ...meta, prompt: prompt ?? usage ?? { promptTokens: 0, cachedTokens: 0 } }));
    meta = undefined;
  };
  const stream: SyncStream = {
    begin: (m) => {
      meta = m;
    },
    prompt: (usage) => {
      prompt = usage;
    },
    text: (index, text) => {
      open();
      write(format.text(index, text));
    },
  };
  try {
    const answer = await inference.run({ ...request, stream });
    open(answer.usage);
    write(format.end(answer.body));
    format.close(sse);
  } catch (err) {
    // Before the first event the refusal is an ordinary answer; after it, the stream's last event.
    if (!sse.started) throw err;
    const id = res.getHeader("x-request-id");
    if (!request.signal.aborted)
      format.fail(sse, toApiError(err, { maxFileBytes: 0 }) ?? internalError(), typeof id === "string" ? id : null);
  }
}

const SUMMARY: Record<Endpoint, string> = {
  "/v1/responses": "Create a response",
  "/v1/chat/completions": "Create a chat completion",
  "/v1/completions": "Create a completion",
  "/v1/embeddings": "Create embeddings",
  "/v1/messages": "Create a message (Anthropic)",
  "/v1/rerank": "Rerank documents (extension: Cohere's and Jina's shape)",
  "/v1/score": "Score text pairs (extension: vLLM's shape)",
};

/** Where a request's answer cannot be known ahead: it depends on what the model serves (a rerank needs a ranker). */
const CAVEAT: Partial<Record<Endpoint, string>> = {
  "/v1/rerank": " A model with no classification head refuses it (400 `model_cannot_rank`).",
  "/v1/score": " A model with no classification head refuses it (400 `model_cannot_rank`).",
  "/v1/embeddings": " A model that cannot embed refuses it (400 `embeddings_unsupported`).",
};

const Answer = z.record(z.string(), z.unknown());

function registerInferencePaths(r: OpenAPIRegistry, ctx: DocContext): void {
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
          "ahead of waiting batch work, within `INTERACTIVE_MAX_SHARE` of the model's sequences; every endpoint takes it. " +
          "A chat completion and a response name their `service_tier` (an Anthropic message: `usage.service_tier`); " +
          "completions, embeddings and the ranking answers have no such field, as their types define them. Chat and completions stream with `stream: true` " +
          "(Server-Sent Events of chunks, `stream_options.include_usage`, then `[DONE]`); responses and Anthropic's messages stream their own events; " +
          "the other endpoints refuse it (400, param `stream`). OpenAI's endpoints (chat, completions, embeddings, responses) " +
          "require `model`, as OpenAI does: a request without one is refused (400 `missing_required_parameter`, param `model`); " +
          "a batch line may leave it to its batch. The ranking endpoints' `model` is optional (the default model), and " +
          `Anthropic's messages require theirs.${CAVEAT[endpoint] ?? ""}`,
        request: { body: { required: true, content: { "application/json": { schema: syncBodySchema(endpoint, ctx.model) } } } },
        responses: {
          200: jsonResponse(Answer, "The endpoint's response body, as OpenAI (or Anthropic) answers it."),
          ...errorResponses(400, 401, 404, 429, 503),
        },
      }),
    );
  }
}

export const inferenceRoutes: RouteModule = {
  source: import.meta.url,
  router: (deps) =>
    deps.inference || deps.syncTargets ? inferenceRouter({ inference: deps.inference, targets: deps.syncTargets }) : undefined,
  paths: registerInferencePaths,
};
