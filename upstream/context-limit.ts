// A request its upstream's context cannot hold, refused on that line as OpenAI refuses it: a 400 with
// `context_length_exceeded` naming the field. Servers say so in their own words (OpenAI's code, llama-server's
// exceed_context_size_error with n_ctx, vLLM's "maximum context length is N tokens" sentence), and llama-server
// does not refuse a max_tokens past its context at all: it answers up to what fits, with finish_reason "length".
// That answer is told apart from max_tokens reached by its usage against the context the upstream reported.
import type { Endpoint } from "../openai/backend.js";
import { completionTooLong, PROMPT_FIELD, RequestError } from "../openai/errors.js";

const CONTEXT_WORDS = /maximum context length|context (length|size|window)/i;

type Json = Record<string, unknown>;
const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
const matched = (re: RegExp, text: string) => {
  const m = re.exec(text);
  return m ? Number(m[1]) : undefined;
};

/** The field that set the answer's limit on this line, as the line wrote it (chat's max_completion_tokens wins). */
function limitOf(body: Json): { param: string; asked: number } | undefined {
  for (const param of ["max_completion_tokens", "max_tokens"]) {
    const asked = num(body[param]);
    if (asked !== undefined) return { param, asked };
  }
  return undefined;
}

/** The `error` object of an upstream's refusal, where its body has one. */
function errorOf(answer: unknown): Json | undefined {
  const e = (answer as { error?: unknown } | null)?.error;
  return e && typeof e === "object" ? (e as Json) : undefined;
}

/** The context size an upstream's refusal reports, where it reports one. */
export function reportedContext(answer: unknown): number | undefined {
  const e = errorOf(answer);
  return e && (num(e.n_ctx) ?? matched(/maximum context length is (\d+)/i, String(e.message ?? "")));
}

/** The upstream's 4xx as OpenAI's context_length_exceeded when it says the context is exceeded; else undefined. */
export function contextRefusal(endpoint: Endpoint, body: Json, answer: unknown): RequestError | undefined {
  const e = errorOf(answer);
  if (!e) return undefined;
  const message = typeof e.message === "string" ? e.message : "";
  if (e.code !== "context_length_exceeded" && e.type !== "exceed_context_size_error" && !CONTEXT_WORDS.test(message)) return undefined;
  const prompt = PROMPT_FIELD[endpoint] ?? null;
  const context = reportedContext(answer);
  const promptTokens = num(e.n_prompt_tokens) ?? matched(/(\d+) in the (?:messages|prompt|input)/i, message);
  const limit = limitOf(body);
  if (promptTokens !== undefined && context !== undefined && promptTokens >= context)
    return new RequestError(
      `This model's maximum context length is ${context} tokens. However, your ${prompt ?? "request"} resulted in ${promptTokens} tokens. Please reduce its length.`,
      "context_length_exceeded",
      false,
      prompt,
    );
  // The server's own words; the field is the one it named, else the limit the line set, else the prompt.
  const param = typeof e.param === "string" && e.param ? e.param : (limit?.param ?? prompt);
  return new RequestError(message || "The request does not fit in the model's context.", "context_length_exceeded", false, param);
}

/**
 * A 2xx whose one answer stopped for length short of the limit the line asked for, at the upstream's context:
 * the request asked for more than the context holds. Undefined when the context is not known, when the answer
 * stopped elsewhere (a server's own cap), or for several choices (whose shares of the usage are not told apart).
 */
export async function contextCut(
  endpoint: Endpoint,
  body: Json,
  answer: Json,
  contextOf: () => Promise<number | undefined>,
): Promise<RequestError | undefined> {
  const limit = limitOf(body);
  const choices = answer.choices;
  if (!limit || !PROMPT_FIELD[endpoint] || !Array.isArray(choices) || choices.length !== 1) return undefined;
  if ((choices[0] as Json | null)?.finish_reason !== "length") return undefined;
  const usage = (answer.usage ?? {}) as Json;
  const [prompt, completion] = [num(usage.prompt_tokens), num(usage.completion_tokens)];
  if (prompt === undefined || completion === undefined || completion >= limit.asked) return undefined;
  // Only an answer short of its limit asks what the context is (once per backend).
  const context = await contextOf();
  if (context === undefined || prompt + completion < context - 1) return undefined;
  return completionTooLong(context, prompt, limit.asked, limit.param);
}

/**
 * The context of the upstream's model, as the server reports it: llama-server's /props (per slot), vLLM's
 * max_model_len in /v1/models. Undefined where the server says neither.
 */
export async function probeContext(get: (path: string) => Promise<unknown>, prefix: string, model: string): Promise<number | undefined> {
  const props = (await get("/props").catch(() => undefined)) as { default_generation_settings?: Json } | undefined;
  const slot = num(props?.default_generation_settings?.n_ctx);
  if (slot !== undefined) return slot;
  const models = (await get(`${prefix}/models`).catch(() => undefined)) as { data?: Json[] } | undefined;
  const card = Array.isArray(models?.data) ? models.data.find((m) => m?.id === model) : undefined;
  return num(card?.max_model_len);
}
