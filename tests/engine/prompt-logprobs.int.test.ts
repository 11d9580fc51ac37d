// A completion's echo with logprobs, as eval harnesses (lm-evaluation-harness) score a choice: the prompt's tokens,
// each with its log probability given the tokens before it (the first null) and the most likely alternatives there,
// checked against the log probabilities computed token by token on a context of its own: at each position the next
// token's log-softmax over the whole vocabulary's raw logits. For a string, a list of strings and
// token arrays, with max_tokens 0 and with generated tokens after.
import type { ControlledEvaluateInputItem, LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import { tokenizePrompt } from "../../engine/generate/tokens.js";
import type { Engine } from "../../engine/types.js";
import { openTestEngine } from "../../testkit/model.js";
import { runLine } from "../helpers/test-engine.js";

let engine: Engine;
let backend: LlamaBackend;
let model: LlamaModel;
let flashAttention: LlamaContext["flashAttention"];
beforeAll(async () => {
  engine = await openTestEngine({ sequences: 2, contextSize: 256 });
  backend = new LlamaBackend(engine);
  // The engine's own model, on a context of its own: the reference shares no cache and no decode with the engine.
  // Its attention is computed as the engine's is (flash attention or not changes the logits' last digits).
  const { parts } = engine as unknown as { parts: { model: LlamaModel; kv: { current: { contexts: LlamaContext[] } } } };
  model = parts.model;
  flashAttention = parts.kv.current.contexts[0].flashAttention;
});
afterAll(async () => {
  await engine?.close();
});

/**
 * log p(ids[i + 1] | ids[..i]) for every position i and every token: the raw logits over the whole vocabulary at each
 * position of one causal evaluation on a context of its own (no cache, no filter, no normaliser from the engine),
 * log-softmaxed here. One evaluation, not one a prefix: a fresh context's decode takes most of a second on the prebuilt
 * build while the engine's threads spin beside it.
 */
async function referenceLogprobs(ids: readonly Token[]): Promise<Array<Map<Token, number>>> {
  const reference: LlamaContext = await model.createContext({ sequences: 1, contextSize: 256, flashAttention });
  const alone: LlamaContextSequence = reference.getSequence();
  const out = await alone
    .controlledEvaluate(ids.map((t): ControlledEvaluateInputItem => [t, { generateNext: { logits: true } }]))
    .finally(() => reference.dispose());
  return out.map((o) => {
    const logits = o?.next.logits;
    if (!logits) throw new Error("no logits");
    const max = Math.max(...logits.values());
    const norm = max + Math.log([...logits.values()].reduce((sum, l) => sum + Math.exp(l - max), 0));
    return new Map([...logits].map(([t, l]) => [t, l - norm]));
  });
}

interface Logprobs {
  tokens: string[];
  token_logprobs: Array<number | null>;
  top_logprobs: Array<Record<string, number> | null>;
  text_offset: number[];
}

/** Each token after the first against its prefix's distribution: its log probability, and the top k's. */
async function expectScored(ids: readonly Token[], lp: Logprobs, k: number, from = 0): Promise<void> {
  expect(lp.token_logprobs[from]).toBeNull();
  expect(lp.top_logprobs[from]).toBeNull();
  const dists = await referenceLogprobs(ids);
  for (let i = 1; i < ids.length; i++) {
    const dist = dists[i - 1];
    const got = lp.token_logprobs[from + i] as number;
    expect(Math.abs(got - dist.get(ids[i])!), `token ${i}`).toBeLessThan(1e-4);
    const ranked = [...dist].sort((a, b) => b[1] - a[1]).slice(0, k);
    const best = ranked.map(([, l]) => l);
    const top = Object.values(lp.top_logprobs[from + i]!).sort((a, b) => b - a);
    // top_logprobs is keyed by a token's text: two of the best with one text (a random model's byte tokens) are one
    // entry, as in OpenAI's answer.
    const texts = new Set(ranked.map(([t]) => model.detokenize([t], true)));
    expect(top).toHaveLength(texts.size);
    expect(Math.abs(top[0] - best[0]), `top 0 of token ${i}`).toBeLessThan(1e-4);
    for (const [j, v] of top.entries()) {
      expect(Math.min(...best.map((b) => Math.abs(v - b))), `top ${j} of token ${i}`).toBeLessThan(1e-4);
    }
    // lm-evaluation-harness calls a choice greedy where each token's log probability is the top one's.
    if (got === Math.max(...top)) expect(best[0] - dist.get(ids[i])!).toBeLessThan(1e-4);
  }
}

const PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside.";

describe("a completion's echo with logprobs on the engine", () => {
  it("scores a string prompt token by token: the first null, each other against its prefix, the text echoed", async () => {
    const ids = tokenizePrompt(model, PROMPT);
    const { body, usage } = await runLine(backend, "/v1/completions", { prompt: PROMPT, max_tokens: 0, echo: true, logprobs: 3 });
    const [choice] = body.choices as Array<{ text: string; logprobs: Logprobs; finish_reason: string }>;
    expect(choice.text).toBe(PROMPT);
    expect(choice.finish_reason).toBe("length");
    expect(choice.logprobs.tokens).toHaveLength(ids.length);
    await expectScored(ids, choice.logprobs, 3);
    // Each token's offset into the echoed text: the tokenizer's beginning-of-sequence token is not in it.
    const { tokens, text_offset } = choice.logprobs;
    const added = ids.length - model.tokenize(PROMPT, true).length;
    for (let i = added; i < tokens.length; i++) expect(choice.text.slice(text_offset[i]).startsWith(tokens[i]), `token ${i}`).toBe(true);
    expect(text_offset[tokens.length - 1] + tokens.at(-1)!.length).toBe(PROMPT.length);
    // The whole prompt evaluated, nothing from a cache (no cached position has its logits).
    expect(usage).toEqual({ promptTokens: ids.length, completionTokens: 0, cachedTokens: 0 });
  });

  it("scores each of a list of strings, and token arrays as they are (no token added)", async () => {
    const texts = ["The cat sat on the mat.", "The dog sat on the log."];
    const listed = await runLine(backend, "/v1/completions", { prompt: texts, max_tokens: 0, echo: true, logprobs: 1 });
    const listChoices = listed.body.choices as Array<{ text: string; logprobs: Logprobs }>;
    expect(listChoices.map((c) => c.text)).toEqual(texts);
    for (const [i, c] of listChoices.entries()) await expectScored(tokenizePrompt(model, texts[i]), c.logprobs, 1);

    const arrays = texts.map((t) => model.tokenize(t, false));
    for (const prompt of [arrays[0], arrays]) {
      const { body } = await runLine(backend, "/v1/completions", { prompt, max_tokens: 0, echo: true, logprobs: 2 });
      const choices = body.choices as Array<{ text: string; logprobs: Logprobs }>;
      const sent = Array.isArray(prompt[0]) ? (prompt as Token[][]) : [prompt as Token[]];
      expect(choices).toHaveLength(sent.length);
      for (const [i, c] of choices.entries()) {
        expect(c.text).toBe(model.detokenize(sent[i], true));
        expect(c.logprobs.tokens).toHaveLength(sent[i].length);
        await expectScored(sent[i], c.logprobs, 2);
      }
    }
  });

  it("follows the prompt's log probabilities with the generated tokens', for each of n choices", async () => {
    const ids = tokenizePrompt(model, PROMPT);
    const { body, usage } = await runLine(backend, "/v1/completions", {
      prompt: PROMPT,
      max_tokens: 4,
      n: 2,
      temperature: 0,
      echo: true,
      logprobs: 2,
    });
    const choices = body.choices as Array<{ text: string; logprobs: Logprobs }>;
    expect(choices).toHaveLength(2);
    expect(usage.completionTokens).toBe(8);
    for (const c of choices) {
      expect(c.text.startsWith(PROMPT)).toBe(true);
      expect(c.logprobs.tokens).toHaveLength(ids.length + 4);
      await expectScored(ids, c.logprobs, 2);
      // The generated tokens: greedy, so each is its position's most likely, and its text begins where it says.
      for (let i = ids.length; i < ids.length + 4; i++) {
        expect(c.logprobs.token_logprobs[i]).toBe(Math.max(...Object.values(c.logprobs.top_logprobs[i]!)));
        expect(c.text.slice(c.logprobs.text_offset[i]).startsWith(c.logprobs.tokens[i])).toBe(true);
      }
      expect(c.logprobs.text_offset[ids.length]).toBe(PROMPT.length);
    }
  });

  it("places tokens within a character where that character begins, in the prompt and in the answer", async () => {
    const prompt = "naïve café ☕ and more";
    const { body, usage } = await runLine(backend, "/v1/completions", { prompt, max_tokens: 6, temperature: 0, echo: true, logprobs: 1 });
    const [choice] = body.choices as Array<{ text: string; logprobs: Logprobs }>;
    const { tokens, text_offset } = choice.logprobs;
    for (let i = 1; i < tokens.length; i++) {
      expect(text_offset[i], `token ${i}`).toBeGreaterThanOrEqual(text_offset[i - 1]);
      expect(text_offset[i]).toBeLessThanOrEqual(choice.text.length);
      // A whole character's token reads where it says (a byte of one shows as U+FFFD).
      if (i > 1 && !tokens[i].includes("\uFFFD")) expect(choice.text.slice(text_offset[i]).startsWith(tokens[i]), `token ${i}`).toBe(true);
    }
    // The answer's first token begins where the echoed prompt ends.
    expect(usage.completionTokens).toBeGreaterThan(0);
    expect(text_offset[tokens.length - usage.completionTokens]).toBe(prompt.length);
  });

  it("echoes a token array's text without logprobs", async () => {
    const ids = model.tokenize("The cat", false);
    const { body } = await runLine(backend, "/v1/completions", { prompt: ids, max_tokens: 2, echo: true, temperature: 0 });
    const [choice] = body.choices as Array<{ text: string; logprobs: unknown }>;
    expect(choice.text.startsWith(model.detokenize(ids, true))).toBe(true);
    expect(choice.logprobs).toBeNull();
  });
});
