// An upstream's answer to a completion with `echo` that does not echo (llama-server answers one without the prompt,
// and without the prompt's log probabilities), refused on its line naming `echo` rather than passed on as if it did:
// a harness would score the answer's tokens as the prompt's.
import { RequestError } from "../openai/errors.js";

type Json = Record<string, unknown>;

/** The refusal, where `body` answers `request` (a completions body asking for echo) without echoing it. */
export function ignoredEcho(request: Json, body: Json): RequestError | undefined {
  if (request.echo !== true || !Array.isArray(body.choices)) return undefined;
  const prompts = promptList(request.prompt);
  const n = typeof request.n === "number" && request.n > 0 ? request.n : 1;
  const scored = request.logprobs != null;
  for (const [i, choice] of (body.choices as Json[]).entries()) {
    const prompt = prompts[Math.floor((typeof choice.index === "number" ? choice.index : i) / n)];
    const logprobs = choice.logprobs as { token_logprobs?: unknown[] } | null | undefined;
    const text = typeof choice.text === "string" ? choice.text : "";
    const echoed = typeof prompt === "string" ? text.startsWith(prompt) : true;
    // The prompt's own log probabilities open the list, the first null (nothing comes before it).
    const promptScored =
      !scored ||
      (Array.isArray(logprobs?.token_logprobs) &&
        logprobs.token_logprobs.length >= promptLength(prompt) &&
        logprobs.token_logprobs[0] === null);
    if (!echoed || !promptScored)
      return new RequestError(
        `The upstream ignored 'echo': its answer ${echoed ? "lacks the prompt's log probabilities" : "does not begin with the prompt"}. Serve this model on a server that echoes (vLLM does; llama-server does not).`,
        "unsupported_value",
        false,
        "echo",
      );
  }
  return undefined;
}

function promptList(prompt: unknown): Array<string | number[]> {
  if (typeof prompt === "string") return [prompt];
  if (!Array.isArray(prompt)) return [];
  return prompt.length > 0 && typeof prompt[0] === "number" ? [prompt as number[]] : (prompt as Array<string | number[]>);
}

/** The fewest log probabilities an echoed prompt has: one per token id, or one for a text. */
const promptLength = (prompt: string | number[] | undefined) => (Array.isArray(prompt) ? prompt.length : 1);
