// The bound on what one answer may make the server hold: a request asking for logprobs gets one entry per token of
// each choice, each with its top alternatives, all held until the answer is written. Past the bound the request is
// refused naming the parameters that multiply, before it runs, streamed or not, synchronous or a batch line.
import type { InferenceRequest } from "./backend.js";
import type { ChatBody, CompletionBody } from "./bodies.js";
import { invalidParameter } from "./errors.js";

/**
 * Logprob entries one answer may hold: n × max_tokens × (1 + top_logprobs), times a completion's prompts. About
 * 48 bytes each in the JSON answer (12 MB at the bound) and several times that while it is built
 * (docs/reliability.md has the figures).
 */
export const MAX_ANSWER_LOGPROBS = 262_144;

/** OpenAI's default max_tokens for /v1/completions. */
const COMPLETION_MAX_TOKENS = 16;

interface Asked {
  n: number;
  /** Completions' prompts: each gets its n choices. */
  prompts: number;
  tokens: number;
  tokensParam: string;
  alternatives: number;
  alternativesParam: string;
}

/**
 * Throws when `request` asks for more logprob entries than the bound. `room` is the tokens a sequence holds: where
 * no max_tokens is set the answer may fill it (without, only a max_tokens the request sets is counted).
 */
export function checkAnswerSize(request: InferenceRequest, room?: number): void {
  const asked =
    request.endpoint === "/v1/chat/completions"
      ? chatAsks(request.body, room)
      : request.endpoint === "/v1/completions"
        ? completionAsks(request.body, room)
        : undefined;
  if (!asked) return;
  const entries = asked.prompts * asked.n * asked.tokens * (1 + asked.alternatives);
  if (entries <= MAX_ANSWER_LOGPROBS) return;
  const { prompts, n, tokens, tokensParam, alternatives, alternativesParam } = asked;
  throw invalidParameter(
    tokensParam,
    `This request could make an answer of ${entries} logprob entries: ${prompts > 1 ? `prompts (${prompts}) × ` : ""}` +
      `n (${n}) × ${tokensParam} (${tokens}) × ` +
      `(1 + ${alternativesParam} (${alternatives})); one answer may hold at most ${MAX_ANSWER_LOGPROBS}. ` +
      `Lower n, ${tokensParam} or ${alternativesParam}, or split the request.`,
  );
}

function chatAsks(b: ChatBody, room: number | undefined): Asked | undefined {
  if (b.logprobs !== true) return undefined;
  const [tokensParam, set] =
    b.max_completion_tokens != null ? ["max_completion_tokens", b.max_completion_tokens] : ["max_tokens", b.max_tokens];
  const tokens = set ?? room;
  if (tokens == null) return undefined;
  return {
    n: b.n ?? 1,
    prompts: 1,
    tokens: Math.min(tokens, room ?? tokens),
    tokensParam,
    alternatives: b.top_logprobs ?? 0,
    alternativesParam: "top_logprobs",
  };
}

function completionAsks(b: CompletionBody, room: number | undefined): Asked | undefined {
  if (b.logprobs == null) return undefined;
  // An echoed prompt is scored too: with the answer it fills at most the sequence.
  const tokens = b.echo === true ? room : (b.max_tokens ?? COMPLETION_MAX_TOKENS);
  if (tokens == null) return undefined;
  // A list of strings or of token-id lists is one prompt each; a list of token ids is one prompt.
  const prompts = Array.isArray(b.prompt) && typeof b.prompt[0] !== "number" ? b.prompt.length : 1;
  return {
    n: b.n ?? 1,
    prompts,
    tokens: Math.min(tokens, room ?? tokens),
    tokensParam: "max_tokens",
    alternatives: b.logprobs,
    alternativesParam: "logprobs",
  };
}
