// Log probabilities in OpenAI's terms from what node-llama-cpp reports per token: the whole distribution it sampled
// from, or a few logits and their normaliser.
import type { LlamaModel, Token } from "node-llama-cpp";
import type { GeneratedTokenLogprob, TokenLogprob } from "../types.js";

/**
 * - `probabilities`: every token's probability, most likely first, as node-llama-cpp's `probabilities` option
 *   gives them: after logit_bias and the penalties (as OpenAI's logprobs are) but also divided by the temperature,
 *   which OpenAI's are not. A temperature T scales every log-probability by 1/T before renormalising, so T x log p,
 *   renormalised over the same tokens, undoes it. With top_p < 1 the distribution was cut to the nucleus first, and
 *   the renormalisation is over the nucleus.
 * - `logits`: a line whose chain leaves the logits as they are (greedy, or temperature 1 with no cut): the top
 *   tokens' and the chosen token's logits after bias and penalties, with `total` the sum of exp(logit - the
 *   largest) over the whole vocabulary, so log p = logit - (largest + log total). Handing over 32,000 probabilities
 *   per token cost 12 times the generation itself on the generated `small` model.
 */
export type TokenScores =
  | { kind: "probabilities"; probabilities: ReadonlyMap<Token, number>; temperature: number }
  | { kind: "logits"; logits: ReadonlyMap<Token, number>; total: number };

export function tokenLogprobs(
  model: LlamaModel,
  /** The tokens before this position, so a word-initial token keeps its leading space. */
  before: readonly Token[],
  chosen: Token,
  scores: TokenScores,
  top: number,
): Omit<GeneratedTokenLogprob, "offset"> {
  const { ranked, logprobOf } =
    scores.kind === "probabilities" ? fromProbabilities(scores.probabilities, scores.temperature, top) : fromLogits(scores);
  const alternatives: TokenLogprob[] = ranked.slice(0, top).map((token) => entry(model, before, token, logprobOf(token)));
  return { ...entry(model, before, chosen, logprobOf(chosen)), top: alternatives };
}

type Ranked = { ranked: Token[]; logprobOf: (token: Token) => number };

function fromProbabilities(probabilities: ReadonlyMap<Token, number>, temperature: number, top: number): Ranked {
  const scale = temperature > 0 ? temperature : 1;
  let max = Number.NEGATIVE_INFINITY;
  for (const p of probabilities.values()) if (p > 0) max = Math.max(max, scale * Math.log(p));
  let sum = 0;
  for (const p of probabilities.values()) if (p > 0) sum += Math.exp(scale * Math.log(p) - max);
  const norm = max + Math.log(sum);
  const logprobOf = (token: Token) => {
    const p = probabilities.get(token);
    return p && p > 0 ? scale * Math.log(p) - norm : -9999;
  };
  // The map comes sorted, most likely first.
  const ranked: Token[] = [];
  for (const token of probabilities.keys()) {
    if (ranked.length >= top) break;
    ranked.push(token);
  }
  return { ranked, logprobOf };
}

function fromLogits({ logits, total }: { logits: ReadonlyMap<Token, number>; total: number }): Ranked {
  const ranked = [...logits.keys()].sort((a, b) => logits.get(b)! - logits.get(a)!);
  const norm = logits.get(ranked[0])! + Math.log(total);
  return { ranked, logprobOf: (token) => (logits.get(token) ?? Number.NEGATIVE_INFINITY) - norm };
}

function entry(model: LlamaModel, before: readonly Token[], token: Token, logprob: number): TokenLogprob {
  const text = model.detokenize([token], true, before as Token[]);
  return { token: text, logprob, bytes: [...Buffer.from(text, "utf8")] };
}
