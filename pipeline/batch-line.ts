// OpenAI batch input lines and the request bodies of the three endpoints, as zod 4 schemas,
// and the translation of a parsed body into engine call parameters.
// Unknown OpenAI fields are tolerated (ignored); fields whose meaning we cannot honour
// (n > 1, stream, logprobs, token-id prompts, non-text content) are refused with a clear message.
import { z } from "zod";
import type { ChatMessage, SamplingParams } from "../engine/types.js";
import type { Endpoint } from "./types.js";

export const ENDPOINTS = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"] as const satisfies readonly Endpoint[];

export const isEndpoint = (v: unknown): v is Endpoint => (ENDPOINTS as readonly unknown[]).includes(v);

/** OpenAI documents no bound; 512 keeps output lines and the resume Set reasonable. */
export const MAX_CUSTOM_ID_LENGTH = 512;

export const BatchLineSchema = z.object({
  custom_id: z
    .string()
    .min(1, "custom_id must not be empty")
    .max(MAX_CUSTOM_ID_LENGTH, `custom_id may be at most ${MAX_CUSTOM_ID_LENGTH} characters`),
  method: z.literal("POST", { error: 'method must be "POST"' }),
  url: z.enum(ENDPOINTS, { error: `url must be one of ${ENDPOINTS.join(", ")}` }),
  body: z.record(z.string(), z.unknown(), { error: "body must be a JSON object" }),
});
export type BatchLine = z.infer<typeof BatchLineSchema>;

// --- shared sampling fields (OpenAI allows null for "unset") ---

const opt = <T extends z.ZodType>(t: T) => t.nullish();
const positiveInt = z.number().int().min(1);

export const SamplingFields = {
  max_tokens: opt(positiveInt),
  temperature: opt(z.number().min(0).max(2)),
  top_p: opt(z.number().min(0).max(1)),
  stop: opt(z.union([z.string(), z.array(z.string()).max(4, "stop may hold at most 4 sequences")])),
  seed: opt(z.number().int()),
};

const onlyOne = (what: string) =>
  opt(
    z
      .number()
      .int()
      .refine((v) => v === 1, `only ${what}=1 is supported: send one request per sample instead`),
  );
const noStream = opt(z.boolean().refine((v) => v === false, "stream is not supported in a batch"));
const model = opt(z.string().min(1));

// --- /v1/chat/completions ---

const TextPart = z.object({
  type: z.literal("text", { error: 'only content parts of type "text" are supported' }),
  text: z.string(),
});

export const ChatMessageSchema = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  // An assistant turn that carried only tool calls has null content.
  content: z.union([z.string(), z.array(TextPart), z.null()]),
  name: z.string().optional(),
});

export const ChatBodySchema = z.looseObject({
  model,
  messages: z.array(ChatMessageSchema).min(1, "messages must hold at least one message"),
  ...SamplingFields,
  max_completion_tokens: opt(positiveInt),
  n: onlyOne("n"),
  stream: noStream,
  logprobs: opt(z.boolean().refine((v) => v === false, "logprobs are not supported")),
});
export type ChatBody = z.infer<typeof ChatBodySchema>;

// --- /v1/completions ---

const promptError = "prompt must be a string or a non-empty array of strings (token-id prompts are not supported)";

export const CompletionBodySchema = z.looseObject({
  model,
  prompt: z.union([z.string(), z.array(z.string()).min(1)], { error: promptError }),
  ...SamplingFields,
  echo: opt(z.boolean()),
  n: onlyOne("n"),
  best_of: onlyOne("best_of"),
  stream: noStream,
  logprobs: opt(
    z
      .number()
      .int()
      .refine((v) => v === 0, "logprobs are not supported"),
  ),
});
export type CompletionBody = z.infer<typeof CompletionBodySchema>;

// --- /v1/embeddings ---

/** OpenAI's per-request bound on embedding inputs. */
export const MAX_EMBEDDING_INPUTS = 2048;

const embeddingInputError =
  "input must be a non-empty string or a non-empty array of non-empty strings (token-id inputs are not supported)";

export const EmbeddingBodySchema = z.looseObject({
  model,
  input: z.union([z.string().min(1), z.array(z.string().min(1)).min(1).max(MAX_EMBEDDING_INPUTS)], { error: embeddingInputError }),
  encoding_format: opt(z.enum(["float", "base64"])),
  dimensions: opt(positiveInt),
});
export type EmbeddingBody = z.infer<typeof EmbeddingBodySchema>;

export function bodySchemaFor(endpoint: Endpoint): z.ZodType {
  switch (endpoint) {
    case "/v1/chat/completions":
      return ChatBodySchema;
    case "/v1/completions":
      return CompletionBodySchema;
    case "/v1/embeddings":
      return EmbeddingBodySchema;
  }
}

// --- body -> engine call parameters ---

function sampling(
  b: {
    max_tokens?: number | null;
    temperature?: number | null;
    top_p?: number | null;
    stop?: string | string[] | null;
    seed?: number | null;
  },
  maxTokens = b.max_tokens,
): SamplingParams {
  const p: SamplingParams = {};
  if (maxTokens != null) p.maxTokens = maxTokens;
  if (b.temperature != null) p.temperature = b.temperature;
  if (b.top_p != null) p.topP = b.top_p;
  if (b.stop != null) {
    const stop = (typeof b.stop === "string" ? [b.stop] : b.stop).filter((s) => s.length > 0);
    if (stop.length > 0) p.stop = stop;
  }
  if (b.seed != null) p.seed = b.seed;
  return p;
}

export function chatCall(body: ChatBody): { messages: ChatMessage[]; params: SamplingParams } {
  const messages = body.messages.map((m) => ({
    role: m.role,
    content: m.content == null ? "" : typeof m.content === "string" ? m.content : m.content.map((p) => p.text).join("\n"),
  }));
  // max_completion_tokens is the newer name of max_tokens and wins when both are sent.
  return { messages, params: sampling(body, body.max_completion_tokens ?? body.max_tokens) };
}

export function completionCall(body: CompletionBody): { prompts: string[]; params: SamplingParams; echo: boolean } {
  const prompts = typeof body.prompt === "string" ? [body.prompt] : body.prompt;
  return { prompts, params: sampling(body), echo: body.echo === true };
}

export function embeddingCall(body: EmbeddingBody): { inputs: string[]; encodingFormat: "float" | "base64"; dimensions?: number } {
  const inputs = typeof body.input === "string" ? [body.input] : body.input;
  const call: ReturnType<typeof embeddingCall> = { inputs, encodingFormat: body.encoding_format ?? "float" };
  if (body.dimensions != null) call.dimensions = body.dimensions;
  return call;
}

/** A zod issue path as OpenAI writes `param`: messages[0].content */
export function paramPath(path: ReadonlyArray<PropertyKey>, prefix?: string): string | null {
  let out = prefix ?? "";
  for (const k of path) out += typeof k === "number" ? `[${k}]` : out ? `.${String(k)}` : String(k);
  return out || null;
}

/** One readable sentence from a zod error: the first issue, with where it is. */
export function describeIssue(
  err: z.ZodError,
  input: unknown,
  prefix?: string,
): { message: string; param: string | null; missing: boolean } {
  const { issue, path } = mostSpecific(err.issues[0], err.issues[0].path);
  const param = paramPath(path, prefix);
  const missing = (issue.code === "invalid_type" || issue.code === "invalid_union") && valueAt(input, path) === undefined;
  if (missing) return { message: `Missing required parameter: '${param}'.`, param, missing };
  return { message: param ? `Invalid '${param}': ${issue.message}` : issue.message, param, missing };
}

/**
 * A failed union says only "Invalid input"; the branch whose type did match (its first issue is not
 * a type mismatch at the union itself) tells what is actually wrong, e.g. the 5th stop sequence.
 */
function mostSpecific(issue: z.core.$ZodIssue, path: PropertyKey[]): { issue: z.core.$ZodIssue; path: PropertyKey[] } {
  if (issue.code !== "invalid_union") return { issue, path };
  for (const branch of issue.errors) {
    const first = branch[0];
    if (first && !(first.code === "invalid_type" && first.path.length === 0)) return mostSpecific(first, [...path, ...first.path]);
  }
  return { issue, path };
}

function valueAt(input: unknown, path: ReadonlyArray<PropertyKey>): unknown {
  let v: any = input;
  for (const k of path) {
    if (v == null || typeof v !== "object") return undefined;
    v = v[k as any];
  }
  return v;
}
