// Log probabilities in OpenAI's terms from node-llama-cpp's per-token probabilities.
import type { LlamaModel, Token } from "node-llama-cpp";
import type { GeneratedTokenLogprob, TokenLogprob } from "./types.js";

/**
 * node-llama-cpp reports the probabilities it sampled from: after logit_bias and the penalties (as OpenAI's
 * logprobs are) but also divided by the temperature, which OpenAI's are not. A temperature T scales every
 * log-probability by 1/T before renormalising, so T x log p, renormalised over the same tokens, undoes it.
 * With top_p < 1 the distribution was cut to the nucleus first, and the renormalisation is over the nucleus.
 */
export function tokenLogprobs(
  model: LlamaModel,
  /** The tokens before this position, so a word-initial token keeps its leading space. */
  before: readonly Token[],
  chosen: Token,
  probabilities: ReadonlyMap<Token, number>,
  temperature: number,
  top: number,
): GeneratedTokenLogprob {
  const scale = temperature > 0 ? temperature : 1;
  let max = Number.NEGATIVE_INFINITY;
  for (const p of probabilities.values()) if (p > 0) max = Math.max(max, scale * Math.log(p));
  let sum = 0;
  for (const p of probabilities.values()) if (p > 0) sum += Math.exp(scale * Math.log(p) - max);
  const norm = max + Math.log(sum);
  const logprobOf = (p: number | undefined) => (p && p > 0 ? scale * Math.log(p) - norm : -9999);

  const alternatives: TokenLogprob[] = [];
  // The map comes sorted, most likely first.
  for (const [token, p] of probabilities) {
    if (alternatives.length >= top) break;
    alternatives.push(entry(model, before, token, logprobOf(p)));
  }
  return { ...entry(model, before, chosen, logprobOf(probabilities.get(chosen))), top: alternatives };
}

function entry(model: LlamaModel, before: readonly Token[], token: Token, logprob: number): TokenLogprob {
  const text = model.detokenize([token], true, before as Token[]);
  return { token: text, logprob, bytes: [...Buffer.from(text, "utf8")] };
}
