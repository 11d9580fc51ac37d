// Which requests may be answered once for all their repeats (the determinism rule), and the one text of a request
// that two bodies asking the same thing share (its canonical form: keys sorted, defaults and absent fields alike).
import type { InferenceRequest } from "../openai/backend.js";

/**
 * Whether the answer is a function of the request: embeddings, rerank and score always; a generating request when it
 * decodes greedily (temperature 0, or a nucleus of 0, which the engine takes as greedy) or names a `seed`. A sampled
 * request without a seed never: its repeats are independent samples.
 */
export function isDeterministic(request: InferenceRequest): boolean {
  switch (request.endpoint) {
    case "/v1/embeddings":
    case "/v1/rerank":
    case "/v1/score":
      return true;
    case "/v1/chat/completions":
    case "/v1/completions":
      return request.body.temperature === 0 || request.body.top_p === 0 || request.body.seed != null;
    case "/v1/responses":
      return request.body.temperature === 0 || request.body.top_p === 0;
    case "/v1/messages":
      return request.body.temperature === 0 || request.body.top_k === 1;
    default:
      return false;
  }
}

/**
 * Fields whose absence and these values ask the same (OpenAI's defaults, as the engine applies them). Only fields
 * whose default no backend reads differently are listed: a missing max_tokens is not, its bound is the backend's.
 */
const DEFAULTS: Readonly<Record<string, unknown>> = {
  n: 1,
  top_p: 1,
  frequency_penalty: 0,
  presence_penalty: 0,
  stream: false,
  logprobs: false,
  echo: false,
  parallel_tool_calls: true,
  encoding_format: "float",
};

/**
 * Fields that change nothing in the answer's body on these endpoints (who asked, how it is delivered), so two
 * requests differing only there share an answer. The Responses and Messages answers echo some of them: kept there.
 */
const IGNORED: Partial<Record<InferenceRequest["endpoint"], readonly string[]>> = {
  "/v1/chat/completions": [
    "user",
    "store",
    "metadata",
    "service_tier",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "stream",
    "stream_options",
  ],
  "/v1/completions": ["user", "stream", "stream_options"],
  "/v1/embeddings": ["user"],
};

/** Each endpoint's ignored fields with `model`, made once: a re-run asks for them on every line. */
const IGNORED_SETS = new Map<string, ReadonlySet<string>>();
const ignoredOn = (endpoint: InferenceRequest["endpoint"]): ReadonlySet<string> => {
  const made = IGNORED_SETS.get(endpoint);
  if (made) return made;
  const set = new Set(["model", ...(IGNORED[endpoint] ?? [])]);
  IGNORED_SETS.set(endpoint, set);
  return set;
};

/**
 * The request as one JSON text: object keys sorted at every depth, null and absent alike, defaults dropped at the top,
 * `model` dropped (the key names the model that serves, by its identity). Numbers are JSON's own (0 and 0.0 and -0
 * read alike); arrays keep their order, which is meaning (messages, documents).
 */
export function canonicalBody(request: InferenceRequest): string {
  const ignored = ignoredOn(request.endpoint);
  const top: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(request.body as Record<string, unknown>)) {
    if (v == null || ignored.has(k)) continue;
    if (k in DEFAULTS && v === DEFAULTS[k]) continue;
    top[k] = v;
  }
  const extra = request.endpoint === "/v1/chat/completions" && request.topK ? { "top_k(anthropic)": request.topK } : {};
  return canonicalJson({ endpoint: request.endpoint, body: top, ...extra });
}

/**
 * JSON with object keys sorted at every depth and null members dropped; -0 written as 0, as JSON does. Built by
 * concatenation: it runs on every line a cache looks up, and arrays of entries cost a re-run a tenth of its lookups.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value ?? null);
  if (Array.isArray(value)) {
    let items = "";
    for (let i = 0; i < value.length; i++) items += `${i ? "," : ""}${value[i] === undefined ? "null" : canonicalJson(value[i])}`;
    return `[${items}]`;
  }
  let members = "";
  for (const k of Object.keys(value).sort()) {
    const v = (value as Record<string, unknown>)[k];
    if (v != null) members += `${members ? "," : ""}${JSON.stringify(k)}:${canonicalJson(v)}`;
  }
  return `{${members}}`;
}
