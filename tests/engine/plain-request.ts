// The GenerationRequest fields the engine tests leave at OpenAI's defaults: no penalties, bias, grammar,
// log probabilities, one choice.
import type { GenerationRequest } from "../../engine/generate/generate.js";

export const PLAIN: Pick<
  GenerationRequest,
  "frequencyPenalty" | "presencePenalty" | "logitBias" | "grammar" | "logprobs" | "n" | "trimTrailingWhitespace"
> = {
  frequencyPenalty: 0,
  presencePenalty: 0,
  logitBias: null,
  grammar: null,
  logprobs: null,
  n: 1,
  trimTrailingWhitespace: false,
};
