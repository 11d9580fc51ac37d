// What the local engine can honour of an OpenAI request body, checked per line before it runs: anything it
// cannot is refused naming the field, so nothing a body asks for is silently dropped.
import { checkAnswerSize } from "../../openai/answer-size.js";
import type { InferenceRequest } from "../../openai/backend.js";
import type { ChatBody, ChatMessageBody, CompletionBody, EmbeddingBody } from "../../openai/bodies.js";
import { invalidParameter, RequestError, unsupportedParameter, unsupportedValue } from "../../openai/errors.js";
import { cannotRank } from "../errors.js";
import { toGrammarSchema } from "../generate/json-schema.js";
import type { Engine } from "../types.js";
import { checkTools } from "./openai-tools.js";

export const notServed = (endpoint: string) => new RequestError(`This backend does not serve ${endpoint}.`, "invalid_url", false);

/** Chat fields this engine has no way to honour, with what each asks for. */
const CHAT_UNSUPPORTED: Array<[keyof ChatBody, string]> = [
  ["functions", "the deprecated function calling (use tools)"],
  ["function_call", "the deprecated function calling (use tool_choice)"],
  ["audio", "audio output"],
  ["prediction", "predicted outputs"],
  ["reasoning_effort", "a reasoning model"],
  ["verbosity", "verbosity control"],
  ["web_search_options", "web search"],
  ["moderation", "moderation"],
  ["prompt_cache_options", "prompt cache options"],
];

/** Throws the RequestError of the first thing in `request` this engine cannot honour; `model` is its served name. */
export function checkRequest(engine: Engine, request: InferenceRequest, model: string): void {
  // Where the request sets no max_tokens, its answer may fill the sequence's context.
  checkAnswerSize(request, engine.info.contextSize);
  if (request.endpoint === "/v1/chat/completions") checkChat(engine, request.body);
  else if (request.endpoint === "/v1/completions") checkCompletion(engine, request.body);
  else if (request.endpoint === "/v1/embeddings") checkEmbedding(engine, request.body);
  else if (request.endpoint === "/v1/rerank" || request.endpoint === "/v1/score") {
    if (!engine.info.ranking) throw cannotRank(model);
  }
  // Responses lines are served over chat by openai/over-chat.ts, which wraps the backend.
  else throw notServed(request.endpoint);
}

function checkChat(engine: Engine, body: ChatBody): void {
  for (const [field, what] of CHAT_UNSUPPORTED) {
    const v = body[field];
    if (v != null && !(Array.isArray(v) && v.length === 0)) {
      throw unsupportedParameter(field, `'${field}' asks for ${what}, which this deployment does not support.`);
    }
  }
  if (body.modalities?.includes("audio"))
    throw unsupportedValue("modalities", 'Only text output is supported: modalities must be ["text"].');
  for (const [i, m] of body.messages.entries()) checkMessage(m, i);
  checkTools(body, engine.info.toolCalling);
  checkLogitBias(engine, body.logit_bias);
  const format = body.response_format;
  if (format?.type === "json_schema") {
    if (!format.json_schema.schema)
      throw invalidParameter("response_format.json_schema.schema", "A json_schema response format needs its 'schema'.");
    toGrammarSchema(format.json_schema.schema, "response_format.json_schema.schema");
  }
}

function checkCompletion(engine: Engine, body: CompletionBody): void {
  if (body.suffix) throw unsupportedParameter("suffix", "'suffix' (insertion) is not supported by this deployment.");
  if (body.best_of != null && body.best_of > 1) {
    throw unsupportedValue("best_of", "best_of > 1 is not supported: ask for n choices and pick among them.");
  }
  const prompts = promptsOf(body);
  if (typeof prompts[0] !== "string") {
    for (const ids of prompts as number[][]) {
      const bad = ids.find((t) => t >= engine.vocabularySize);
      if (bad !== undefined)
        throw invalidParameter("prompt", `Token id ${bad} is not in the model's vocabulary of ${engine.vocabularySize} tokens.`);
    }
  }
  checkLogitBias(engine, body.logit_bias);
}

function checkEmbedding(engine: Engine, body: EmbeddingBody): void {
  const inputs = Array.isArray(body.input) ? body.input : [body.input];
  if (typeof inputs[0] !== "string") throw unsupportedValue("input", "Token-id inputs are not supported for embeddings: send text.");
  const native = engine.info.embeddingDimensions;
  // Truncating a model that was not trained for it (Matryoshka) gives poor vectors, so only the native size is served.
  if (body.dimensions != null && body.dimensions !== native) {
    throw unsupportedValue(
      "dimensions",
      `This model produces ${native}-dimensional embeddings; 'dimensions' must be ${native} or omitted.`,
    );
  }
}

function checkLogitBias(engine: Engine, bias: Record<string, number> | null | undefined): void {
  for (const key of Object.keys(bias ?? {})) {
    const token = Number(key);
    if (token >= engine.vocabularySize) {
      throw invalidParameter("logit_bias", `Token id ${token} is not in the model's vocabulary of ${engine.vocabularySize} tokens.`);
    }
    if (engine.isEndOfGeneration(token)) {
      throw unsupportedValue("logit_bias", `Token id ${token} ends generation; biasing it is not supported.`);
    }
  }
}

function checkMessage(m: ChatMessageBody, i: number): void {
  const at = `messages[${i}]`;
  if (m.role === "function") throw unsupportedValue(`${at}.role`, "The deprecated 'function' role is not supported; use 'tool'.");
  if ("name" in m && m.name !== undefined) {
    throw unsupportedParameter(`${at}.name`, "Participant names are not supported: the model's chat template has no place for them.");
  }
  if (m.role === "assistant") {
    for (const field of ["function_call", "audio"] as const) {
      if (m[field] != null)
        throw unsupportedParameter(`${at}.${field}`, `Assistant messages with '${field}' are not supported by this deployment.`);
    }
  }
  if (Array.isArray(m.content)) {
    for (const [j, part] of m.content.entries()) {
      // An assistant's refusal part is text it said (the schema allows it in assistant messages only).
      if (part.type !== "text" && part.type !== "refusal") {
        throw unsupportedValue(
          `${at}.content[${j}]`,
          `Content parts of type '${part.type}' are not supported: this deployment serves a text-only model.`,
        );
      }
    }
  }
}

export function promptsOf(body: CompletionBody): Array<string | number[]> {
  const p = body.prompt;
  if (typeof p === "string") return [p];
  if (p.length > 0 && typeof p[0] === "number") return [p as number[]];
  return p as Array<string | number[]>;
}
