// The synchronous endpoints' request bodies as the OpenAPI document shows them: each endpoint's own schema (the one
// a batch line of it is checked with, parse/request.ts), with `stream` and `stream_options` as the synchronous route
// takes them, and an example that runs as it is on the deployment that serves the document.
import { extendZodWithOpenApi } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { STREAMED } from "../../domain/sync-inference.js";
import type { Endpoint } from "../../openai/backend.js";
import { bodySchemaFor } from "../../parse/request.js";

extendZodWithOpenApi(z);

/** Each body's name in the document, as OpenAI's and Anthropic's references name them. */
const NAMES: Record<Endpoint, string> = {
  "/v1/responses": "CreateResponseRequest",
  "/v1/chat/completions": "CreateChatCompletionRequest",
  "/v1/completions": "CreateCompletionRequest",
  "/v1/embeddings": "CreateEmbeddingRequest",
  "/v1/messages": "CreateMessageRequest",
  "/v1/rerank": "RerankRequest",
  "/v1/score": "ScoreRequest",
};

const documents = ["A cat is a small animal that purrs.", "The sky is blue on a clear day.", "Cats sleep for most of the day."];

/** A short request of each endpoint that the model `model` answers at once. */
export function syncExample(endpoint: Endpoint, model: string): Record<string, unknown> {
  switch (endpoint) {
    case "/v1/responses":
      return { model, input: "Write one sentence about the sea.", max_output_tokens: 32 };
    case "/v1/chat/completions":
      return { model, messages: [{ role: "user", content: "Say hello in five words." }], max_tokens: 32 };
    case "/v1/completions":
      return { model, prompt: "Once upon a time", max_tokens: 32 };
    case "/v1/embeddings":
      return { model, input: "The quick brown fox jumps over the lazy dog." };
    case "/v1/messages":
      return { model, max_tokens: 32, messages: [{ role: "user", content: "Say hello in five words." }] };
    case "/v1/rerank":
      return { model, query: "What do cats do?", documents, top_n: 2 };
    case "/v1/score":
      return { model, text_1: "What do cats do?", text_2: documents };
  }
}

/** OpenAI's stream options, as the synchronous chat and completions routes check them (sync/request.ts). */
const StreamOptions = z
  .strictObject({
    include_usage: z.boolean().optional().openapi({ description: "A last chunk with the request's usage." }),
    include_obfuscation: z.boolean().optional().openapi({ description: "Accepted; this service adds no obfuscation padding." }),
  })
  .nullish()
  .openapi({ description: "Only with `stream: true`." });

const stream = z.boolean().nullish().openapi({ description: "Server-Sent Events as the answer is generated.", example: false });

/** The body of POST `endpoint`, named, with its example. */
export function syncBodySchema(endpoint: Endpoint, model: string): z.ZodType {
  const base = bodySchemaFor(endpoint) as z.ZodObject;
  // A batch line refuses `stream`; the synchronous route serves it where the endpoint streams. The schema is always a
  // fresh one: `base` may have been made before zod was extended with `openapi` (whichever module loaded first).
  const streams: z.ZodRawShape = !STREAMED.includes(endpoint)
    ? {}
    : endpoint === "/v1/chat/completions" || endpoint === "/v1/completions"
      ? { stream, stream_options: StreamOptions }
      : { stream };
  return base.safeExtend(streams).openapi(NAMES[endpoint], { example: syncExample(endpoint, model) });
}
