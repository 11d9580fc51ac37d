// What a batch file asks of the engine, counted without running a line: its distinct requests by the result cache's
// canonical key (cache/rule.ts), the lines the cache would answer (repeats, and answers it holds now), its prompt
// tokens by the model's own tokenizer as the engine renders them, its generation bounds, and the prompt tokens
// prefix sharing would spare. The queue, rates and prices that turn this into seconds and money are the caller's.
import { createHash } from "node:crypto";
import type { Readable } from "node:stream";
import { canonicalBody, isDeterministic } from "../cache/rule.js";
import { type Endpoint, type InferenceBackend, type InferenceRequest, READS_ONLY } from "../openai/backend.js";
import { parseRequest } from "../parse/request.js";
import { readJsonlLines } from "./jsonl.js";
import { answers, DEFAULT_CHAT_TOKENS, DEFAULT_COMPLETION_TOKENS, lineTokens, type TokenCounter } from "./token-estimate.js";

/** A prompt token costs about this share of a generated one: prompts are evaluated many tokens per step. */
export const PROMPT_TOKEN_WEIGHT = 1 / 8;
/** The engine copies a shared opening of at least this many tokens (engine/pool/prefix-share.ts). */
const MIN_SHARED_TOKENS = 8;
/** Openings are compared up to this many characters: what a plan holds per distinct request. */
const OPENING_CHARS = 1024;
const CHARS_PER_TOKEN = 4;

export interface PlanOptions {
  endpoint: Endpoint;
  /** The backend of a line's model where this process has it up (its tokenizer, its cache); else estimated. */
  backendFor(model: string | undefined): InferenceBackend | undefined;
  /** Counts text with a model's tokenizer where it is loaded (the fallback for what a backend cannot render). */
  countTokens?: TokenCounter;
  /** The batch's cache: its key's scope, and off where RESULT_CACHE or `metadata.cache` says so. */
  cache: { on: boolean; scope: string };
  /** Parameters under every line's body (the batch's and its model's defaults), as a create writes them. */
  defaults?: Readonly<Record<string, unknown>>;
  maxLineBytes?: number;
}

export interface PlanCounts {
  lines: number;
  /** Lines whose body will fail when it runs (its error line written at once): no tokens counted. */
  invalid_lines: number;
  distinct_requests: number;
  cached_lines: number;
  input_tokens: number;
  /** Of input_tokens, those of the cached lines. */
  cached_input_tokens: number;
  max_output_tokens: number;
  /** Of max_output_tokens, those of the cached lines (nothing is generated for them). */
  cached_output_tokens: number;
  shared_prefix_tokens: number;
  /** Whether every prompt was counted by its model's tokenizer (else some were estimated from characters). */
  tokenizer: "model" | "estimate";
  /** The work left to compute, in generated-token equivalents (prompt tokens weighted, cached lines none). */
  work: number;
  /** The model the lines name first, if any. */
  model?: string;
}

interface Opening {
  text: string;
  model: string | undefined;
  /** The request's prompt tokens. */
  tokens: number;
}

interface Distinct {
  promptTokens: number;
  generated: number;
}

/** Counts the plan of a batch file (a path or a stream of its bytes), which the caller has validated. */
export async function planFile(source: string | Readable, opts: PlanOptions): Promise<PlanCounts> {
  const counts: PlanCounts = {
    lines: 0,
    invalid_lines: 0,
    distinct_requests: 0,
    cached_lines: 0,
    input_tokens: 0,
    cached_input_tokens: 0,
    max_output_tokens: 0,
    cached_output_tokens: 0,
    shared_prefix_tokens: 0,
    tokenizer: "model",
    work: 0,
  };
  // One entry per distinct request, by the sha256 of its model and canonical form: memory flat in the lines' size.
  const seen = new Map<string, Distinct>();
  const openings: Opening[] = [];
  for await (const line of readJsonlLines(source, { maxLineBytes: opts.maxLineBytes })) {
    if (line.tooLong || line.text.trim() === "") continue;
    counts.lines++;
    const parsed = parseLine(line.text, opts);
    if (!parsed) {
      counts.invalid_lines++;
      continue;
    }
    const { request, model } = parsed;
    counts.model ??= model;
    const deterministic = opts.cache.on && isDeterministic(request);
    const key = deterministic ? digest(`${model ?? ""}\n${canonicalBody(request)}`) : `line ${counts.lines}`;
    const known = seen.get(key);
    if (known) {
      counts.cached_lines++;
      counts.input_tokens += known.promptTokens;
      counts.cached_input_tokens += known.promptTokens;
      counts.max_output_tokens += known.generated;
      counts.cached_output_tokens += known.generated;
      continue;
    }
    const backend = opts.backendFor(model);
    const d = measure(request, backend, opts, counts);
    if (deterministic) seen.set(key, d);
    counts.distinct_requests++;
    counts.input_tokens += d.promptTokens;
    counts.max_output_tokens += d.generated;
    if (deterministic && (await backend?.remembered?.(request, { cacheScope: opts.cache.scope, useCache: true }))) {
      counts.cached_lines++;
      counts.cached_input_tokens += d.promptTokens;
      counts.cached_output_tokens += d.generated;
      continue;
    }
    counts.work += d.generated + d.promptTokens * PROMPT_TOKEN_WEIGHT;
    openings.push({ text: openingText(request.body as Record<string, unknown>).slice(0, OPENING_CHARS), model, tokens: d.promptTokens });
  }
  counts.shared_prefix_tokens = sharedPrefixTokens(openings, opts.countTokens);
  counts.work = Math.max(0, counts.work - counts.shared_prefix_tokens * PROMPT_TOKEN_WEIGHT);
  return counts;
}

/** A line's request as it will run (its defaults under it), or undefined where its body will be refused. */
function parseLine(text: string, opts: PlanOptions): { request: InferenceRequest; model: string | undefined } | undefined {
  try {
    const line = JSON.parse(text) as { body?: Record<string, unknown> };
    const body = { ...opts.defaults, ...line.body };
    return { request: parseRequest(opts.endpoint, body), model: typeof body.model === "string" ? body.model : undefined };
  } catch {
    return undefined;
  }
}

/** A request's prompt tokens (the backend's count where it has one, else the estimate) and its generation bound. */
function measure(request: InferenceRequest, backend: InferenceBackend | undefined, opts: PlanOptions, counts: PlanCounts): Distinct {
  const body = request.body as Record<string, unknown>;
  let promptTokens: number | undefined;
  try {
    promptTokens = backend?.promptTokens?.(request);
  } catch {
    // A prompt the template refuses fails when it runs; it is estimated here.
  }
  if (promptTokens === undefined) {
    counts.tokenizer = "estimate";
    // A reads-only endpoint's estimate is its prompt alone.
    promptTokens = lineTokens("/v1/embeddings", body, opts.countTokens);
  }
  return { promptTokens, generated: generationBound(opts.endpoint, body) };
}

/** The most a line may generate: its bound for each answer it asks, or the endpoint's default bound. */
export function generationBound(endpoint: Endpoint, body: Record<string, unknown>): number {
  if (READS_ONLY.includes(endpoint)) return 0;
  const limit = [body.max_completion_tokens, body.max_tokens, body.max_output_tokens].find(
    (v): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0,
  );
  return (limit ?? (endpoint === "/v1/completions" ? DEFAULT_COMPLETION_TOKENS : DEFAULT_CHAT_TOKENS)) * answers(endpoint, body);
}

/**
 * The prompt tokens the engine's prefix sharing would spare: sorted, each opening shares the most with a neighbour,
 * and every request after the first of a family copies that much instead of evaluating it (at least the engine's
 * copy threshold). An estimate from the requests' texts, counted by the tokenizer where it is loaded.
 */
function sharedPrefixTokens(openings: Opening[], count?: TokenCounter): number {
  const sorted = openings.sort((a, b) => ((a.model ?? "") + a.text < (b.model ?? "") + b.text ? -1 : 1));
  let spared = 0;
  for (let i = 1; i < sorted.length; i++) {
    const [a, b] = [sorted[i - 1], sorted[i]];
    if (a.model !== b.model) continue;
    const chars = commonPrefix(a.text, b.text);
    if (chars === 0) continue;
    const prefix = b.text.slice(0, chars);
    const tokens = count?.(b.model ?? "", prefix) ?? Math.floor(chars / CHARS_PER_TOKEN);
    // A request never spares its whole prompt: its last token is evaluated to begin its answer.
    if (tokens >= MIN_SHARED_TOKENS) spared += Math.min(tokens, b.tokens - 1);
  }
  return spared;
}

/** A prompt's text in the order a template writes it (tools, instructions, each message's role and text), unquoted. */
function openingText(body: Record<string, unknown>): string {
  const parts: string[] = [];
  if (body.tools !== undefined) parts.push(JSON.stringify(body.tools));
  for (const k of ["system", "instructions"]) if (body[k] !== undefined) parts.push(partsText(body[k]));
  if (Array.isArray(body.messages))
    for (const m of body.messages as Array<{ role?: unknown; content?: unknown }>)
      parts.push(`${String(m?.role)}\n${partsText(m?.content)}`);
  const prompt = body.prompt ?? body.input ?? body.query ?? body.text_1;
  if (prompt !== undefined) parts.push(partsText(prompt));
  return parts.join("\n");
}

/** Text, or the texts of content parts, joined; anything else as its JSON. */
function partsText(v: unknown): string {
  if (typeof v === "string") return v;
  if (Array.isArray(v) && v.every((p) => typeof (p as { text?: unknown })?.text === "string"))
    return v.map((p) => (p as { text: string }).text).join("\n");
  return JSON.stringify(v ?? "");
}

function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

const digest = (text: string) => createHash("sha256").update(text).digest("base64");
