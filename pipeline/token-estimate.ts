// What a line may cost in tokens, estimated before it runs: the enqueued tokens a key's limit counts. Its prompt's
// tokens (by the model's tokenizer where this process has it loaded, else one token per 4 characters, OpenAI's
// rule of thumb) plus the most it may generate: max_completion_tokens, max_tokens or max_output_tokens, for each
// answer it asks for (every prompt of a completions list, times n or best_of).
import { type Endpoint, READS_ONLY } from "../openai/backend.js";

/** Tokens in `text` by `model`'s tokenizer, or undefined where this process cannot tokenize for it. */
export type TokenCounter = (model: string, text: string) => number | undefined;

const CHARS_PER_TOKEN = 4;
/** A chat template's tokens around each message (role, separators). */
const PER_MESSAGE_TOKENS = 4;
/** Generated tokens reserved for a line that sets no limit: completions' documented default, else a chat's. */
export const DEFAULT_COMPLETION_TOKENS = 16;
export const DEFAULT_CHAT_TOKENS = 1024;

/** The line's estimated tokens: prompt and the most it may generate. */
export function lineTokens(endpoint: Endpoint, body: Record<string, unknown>, count?: TokenCounter): number {
  const model = typeof body.model === "string" ? body.model : "";
  const { texts, tokens, messages } = promptParts(body);
  let prompt = tokens + messages * PER_MESSAGE_TOKENS;
  for (const text of texts) if (text) prompt += count?.(model, text) ?? Math.ceil(text.length / CHARS_PER_TOKEN);
  if (READS_ONLY.includes(endpoint)) return prompt;
  const limit = firstCount(body.max_completion_tokens, body.max_tokens, body.max_output_tokens);
  const generated = limit ?? (endpoint === "/v1/completions" ? DEFAULT_COMPLETION_TOKENS : DEFAULT_CHAT_TOKENS);
  return prompt + generated * answers(endpoint, body);
}

/**
 * How many answers a line generates: one per choice (n, or best_of where an upstream generates that many and
 * returns the best n), and on /v1/completions that many for every prompt of a list.
 */
export function answers(endpoint: Endpoint, body: Record<string, unknown>): number {
  const choices = Math.max(1, firstCount(body.n) ?? 1, firstCount(body.best_of) ?? 1);
  return endpoint === "/v1/completions" ? choices * promptCount(body.prompt) : choices;
}

/** The prompts of a completions body: a list of strings or of token-id arrays holds several, anything else one. */
function promptCount(prompt: unknown): number {
  if (!Array.isArray(prompt) || prompt.length === 0) return 1;
  return prompt.every((p) => typeof p === "number") ? 1 : prompt.length;
}

const docs = (v: unknown) => (Array.isArray(v) ? v.length : 0);

function firstCount(...values: unknown[]): number | undefined {
  for (const v of values) if (typeof v === "number" && Number.isInteger(v) && v >= 0) return v;
  return undefined;
}

/** The prompt's texts, the tokens given as token ids, and its messages (each adds a template's few tokens). */
function promptParts(body: Record<string, unknown>): { texts: string[]; tokens: number; messages: number } {
  const texts: string[] = [];
  let tokens = 0;
  let messages = 0;
  const add = (v: unknown): void => {
    if (typeof v === "string") texts.push(v);
    else if (typeof v === "number") tokens++;
    else if (Array.isArray(v)) v.forEach(add);
    else if (v && typeof v === "object") {
      const o = v as Record<string, unknown>;
      if ("role" in o) messages++;
      // A message's or part's text; a tool call's arguments; a tool's schema: what the template writes out.
      for (const k of ["content", "text", "arguments", "input", "output"]) if (k in o) add(o[k]);
      if ("function" in o) texts.push(JSON.stringify(o.function));
      if ("input_schema" in o) texts.push(JSON.stringify(o.input_schema));
    }
  };
  for (const k of ["system", "instructions", "messages", "prompt", "input", "suffix", "text_1", "text_2", "documents"]) add(body[k]);
  // A rerank line's query is read beside each of its documents.
  if (typeof body.query === "string") for (let i = 0; i < Math.max(1, docs(body.documents)); i++) texts.push(body.query);
  if (body.tools !== undefined) texts.push(JSON.stringify(body.tools));
  return { texts, tokens, messages };
}
