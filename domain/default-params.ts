// A batch's `default_params` (an extension): request parameters, such as `temperature` or `max_tokens`, that apply
// to every line whose body does not set them. Checked at create against the endpoint's own schema, so a default
// the endpoint would refuse is a 400 naming it, not a batch of failed lines; applied by writing the batch's own
// copy of its input, so a run, a resume, a retry and every worker read the same lines.

import type { Endpoint } from "../openai/backend.js";
import { RequestError } from "../openai/errors.js";
import { tooDeepAt } from "../openai/json-depth.js";
import { parseRequest } from "../parse/request.js";
import { InvalidRequestError } from "./errors.js";

/** What a line's body must say itself: its content and its model are never defaults. */
const NOT_DEFAULTS = new Set(["model", "messages", "prompt", "input", "system", "instructions", "stream"]);
const MAX_KEYS = 32;

/** The smallest body each endpoint takes, to check defaults on. */
function minimalBody(endpoint: Endpoint): Record<string, unknown> {
  const user = [{ role: "user", content: "x" }];
  if (endpoint === "/v1/chat/completions") return { model: "m", messages: user };
  if (endpoint === "/v1/messages") return { model: "m", max_tokens: 1, messages: user };
  if (endpoint === "/v1/completions") return { model: "m", prompt: "x" };
  return { model: "m", input: "x" };
}

/** Throws InvalidRequestError naming `default_params.<key>` where a default is not one the endpoint takes. */
export function checkDefaultParams(endpoint: Endpoint, params: Readonly<Record<string, unknown>>): void {
  const keys = Object.keys(params);
  if (keys.length > MAX_KEYS)
    throw new InvalidRequestError(`default_params may hold at most ${MAX_KEYS} parameters.`, "invalid_value", "default_params");
  const content = keys.find((k) => NOT_DEFAULTS.has(k));
  if (content !== undefined)
    throw new InvalidRequestError(
      `Invalid 'default_params.${content}': a line's ${content} is its own, never a default.`,
      "invalid_value",
      `default_params.${content}`,
    );
  try {
    parseRequest(endpoint, { ...minimalBody(endpoint), ...params });
  } catch (err) {
    if (!(err instanceof RequestError)) throw err;
    const param = err.param ? `default_params.${err.param}` : "default_params";
    // The endpoint's message names the field as a line's body has it; here it is the batch's default.
    const named = err.param ? err.message.replace(`'${err.param}'`, `'${param}'`) : err.message;
    throw new InvalidRequestError(named === err.message ? `Invalid '${param}': ${err.message}` : named, err.code, param);
  }
}

/** The line with the defaults under its body's own parameters; a line that is not a request is left as it is. */
export function withDefaults(line: string, params: Readonly<Record<string, unknown>>): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return line;
  }
  const body = (parsed as { body?: unknown } | null)?.body;
  // A body nested past the bound is refused as it runs; written out again, it would overflow the stack here.
  if (!body || typeof body !== "object" || Array.isArray(body) || tooDeepAt(body)) return line;
  return JSON.stringify({ ...(parsed as object), body: { ...params, ...body } });
}

/** Of a model's defaults (the models file's), those this endpoint takes: `max_tokens` means nothing to embeddings. */
export function defaultsFor(endpoint: Endpoint, params: Readonly<Record<string, unknown>> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(params ?? {})) {
    try {
      checkDefaultParams(endpoint, { [k]: v });
      out[k] = v;
    } catch {
      // Not a parameter of this endpoint: it applies to the model's other endpoints.
    }
  }
  return out;
}
