// Turning a completion prompt into the tokens the model sees, the way llama.cpp's server does:
// special-token text (e.g. "<|im_start|>") is parsed, and the beginning-of-sequence token is prepended
// when the model's tokenizer asks for it.
import type { LlamaModel, Token } from "node-llama-cpp";

export function tokenizePrompt(model: LlamaModel, text: string): Token[] {
  return withBos(model, model.tokenize(text, true));
}

/** Prepends the beginning-of-sequence token, in place, when the model's tokenizer asks for it and it is missing. */
export function withBos(model: LlamaModel, tokens: Token[]): Token[] {
  const bos = model.tokens.bos;
  if (model.tokens.shouldPrependBosToken && bos != null && tokens[0] !== bos) tokens.unshift(bos);
  return tokens;
}
