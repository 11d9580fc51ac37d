// A prompt's own log probabilities (a completion's `echo` with `logprobs`, how eval harnesses score a choice): each
// token's given the tokens before it, the first having none, read from one evaluation of the prompt that keeps every
// position's logits.
import type { ControlledEvaluateInputItem, EvaluationPriority, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import type { PromptTokenLogprob } from "../types.js";
import { tokenLogprobs } from "./logprobs.js";

/** Tokens of context a token's text is detokenized with, so a word-initial token keeps its leading space. */
const CONTEXT_TOKENS = 8;
/** A piece ending in this is an incomplete UTF-8 character, unless this many tokens could not complete it. */
const REPLACEMENT_CHAR = "\uFFFD";
const MAX_PARTIAL_TOKENS = 4;

/**
 * Evaluates all but the last of `tokens` on `sequence`, whose cache must be empty (a cached position has no logits
 * left to read), asking at each position for the next prompt token's logit, the `top` largest and their normaliser:
 * the whole vocabulary never crosses from the addon. The last token is left for the generation, whose first token
 * its logits give. `added` leading tokens are the tokenizer's own (a beginning-of-sequence token): not in the text.
 */
export async function scorePrompt(
  sequence: LlamaContextSequence,
  model: LlamaModel,
  tokens: readonly Token[],
  top: number,
  added: number,
  evaluationPriority: EvaluationPriority,
): Promise<PromptTokenLogprob[]> {
  const items = tokens.slice(0, -1).map(
    (token, i): ControlledEvaluateInputItem => [
      token,
      {
        generateNext: {
          logits: { filter: { tokens: [tokens[i + 1]], includeMax: true, includeTop: top } },
          totalLogitWeight: true,
        },
      },
    ],
  );
  const out = items.length > 0 ? await sequence.controlledEvaluate(items, { evaluationPriority }) : [];
  const offsets = textOffsets(model, tokens.slice(added));
  return tokens.map((token, i): PromptTokenLogprob => {
    // The text's first token as the text begins with it (a word-initial marker there is no space).
    const before = i <= added ? [] : tokens.slice(Math.max(added, i - CONTEXT_TOKENS), i);
    const offset = i < added ? 0 : offsets[i - added];
    if (i === 0) {
      const text = model.detokenize([token], true);
      return { token: text, logprob: null, bytes: [...Buffer.from(text, "utf8")], top: null, offset };
    }
    const next = out[i - 1]?.next;
    if (!next?.logits || next.totalLogitWeight === undefined) throw new Error(`No logits were returned for prompt position ${i - 1}.`);
    const scores = { kind: "logits", logits: next.logits, total: next.totalLogitWeight } as const;
    return { ...tokenLogprobs(model, before, token, scores, top), offset };
  });
}

/**
 * Where each token begins in the tokens' text, as the whole is detokenized: a token that ends within a character (a
 * byte of a multi-byte one) waits for the rest, so the tokens after it begin where that character does.
 */
function textOffsets(model: LlamaModel, tokens: readonly Token[]): number[] {
  let length = 0;
  let pending: Token[] = [];
  return tokens.map((token, i) => {
    const at = length;
    pending.push(token);
    const piece = model.detokenize(
      pending,
      true,
      tokens.slice(Math.max(0, i + 1 - pending.length - CONTEXT_TOKENS), i + 1 - pending.length),
    );
    if (!piece.endsWith(REPLACEMENT_CHAR) || pending.length >= MAX_PARTIAL_TOKENS) {
      length += piece.length;
      pending = [];
    }
    return at;
  });
}
