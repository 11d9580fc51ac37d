// Prefix families on the real library: a shared prefix is evaluated once per context and copied to the other
// sequences (counted in the tokens the decodes evaluated), and the internal node-llama-cpp method it relies on is
// pinned, so an upgrade that changes it fails here instead of running slower unnoticed.
import { LlamaContextSequence } from "node-llama-cpp";
import { afterAll, describe, expect, it } from "vitest";
import { createEngine, type Engine } from "../../engine/index.js";
import { MIN_COPY_TOKENS } from "../../engine/prefix-share.js";
import { testModelPath } from "../../testkit/model.js";

const engines: Engine[] = [];
async function make(contexts: number, prefixCopy: boolean): Promise<Engine> {
  const engine = await createEngine({
    modelPath: await testModelPath(),
    generatedModel: false,
    gpu: false,
    threads: 1,
    sequences: 4 * contexts,
    contexts,
    contextSize: 512,
    embeddingContexts: 1,
    prefixCopy,
  });
  engines.push(engine);
  return engine;
}
afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
});

const PREFIX = `Rules for every story. ${"Every story has a child, a dog and a red ball in a sunny park. ".repeat(14)}Now the story:`;
const prompts = (n: number) => Array.from({ length: n }, (_, i) => `${PREFIX} ${["Lily", "Tom", "Ben", "Sue"][i % 4]} had ${i} cats and`);
const greedy = { temperature: 0, maxTokens: 4 };

/** Runs the prompts all at once; returns the prompt tokens the decodes evaluated (generated tokens taken out). */
async function evaluatedPromptTokens(engine: Engine, texts: string[]) {
  const before = engine.scheduling();
  const results = await Promise.all(texts.map((t) => engine.complete(t, greedy)));
  const after = engine.scheduling();
  const generated = results.reduce((n, r) => n + r.completionTokens, 0);
  // Each answer's last token is sampled and never evaluated; every other generated token is.
  const evaluatedGenerated = generated - results.length;
  return {
    prompt: after.evaluatedTokens - before.evaluatedTokens - evaluatedGenerated,
    copies: after.prefixCopies - before.prefixCopies,
    cached: results.reduce((n, r) => n + r.cachedPromptTokens, 0),
    results,
  };
}

describe("prefix families (engine/prefix-share.ts)", () => {
  it("node-llama-cpp 3.22.1 still has the internal copy this relies on, with the same shape", () => {
    const method = (LlamaContextSequence.prototype as unknown as Record<string, unknown>)._copyStateFromOtherSequence;
    expect(typeof method).toBe("function");
    expect((method as (...a: unknown[]) => unknown).length).toBe(2);
  });

  it("one context: the shared prefix is evaluated once, the other sequences copy it", async () => {
    const engine = await make(1, true);
    expect(engine.info.prefixCopy).toBe(true);
    const prefixTokens = engine.countTokens(PREFIX);
    expect(prefixTokens).toBeGreaterThan(MIN_COPY_TOKENS);
    const texts = prompts(4);
    const suffixes = texts.reduce((n, t) => n + engine.countTokens(t), 0) - 4 * prefixTokens;
    const run = await evaluatedPromptTokens(engine, texts);
    expect(run.copies).toBe(3);
    // The prefix once, each prompt's own tail, and a token or two where a tokenization boundary moves.
    expect(run.prompt).toBeLessThanOrEqual(prefixTokens + suffixes + 8);
    expect(run.cached).toBeGreaterThanOrEqual(3 * (prefixTokens - 2));
    for (const r of run.results) expect(r.completionTokens).toBe(4);
  });

  it("switched off (the fallback), every sequence evaluates the prefix itself", async () => {
    const engine = await make(1, false);
    expect(engine.info.prefixCopy).toBe(false);
    const prefixTokens = engine.countTokens(PREFIX);
    const run = await evaluatedPromptTokens(engine, prompts(4));
    expect(run.copies).toBe(0);
    expect(run.prompt).toBeGreaterThanOrEqual(4 * prefixTokens);
  });

  it("two contexts: the prefix is evaluated once per context, not once per sequence", async () => {
    const engine = await make(2, true);
    const prefixTokens = engine.countTokens(PREFIX);
    const texts = prompts(8);
    const suffixes = texts.reduce((n, t) => n + engine.countTokens(t), 0) - 8 * prefixTokens;
    const run = await evaluatedPromptTokens(engine, texts);
    expect(run.copies).toBe(6);
    expect(run.prompt).toBeLessThanOrEqual(2 * prefixTokens + suffixes + 16);
  });

  it("a shared opening shorter than MIN_COPY_TOKENS is evaluated by each sequence, not waited for and copied", async () => {
    const engine = await make(1, true);
    // Some tens of tokens: a copy would pay for itself in compute, but not for the wait.
    const opening = "Once upon a time, there was a girl named Lily. She had a dog and a red ball. ".repeat(3);
    expect(engine.countTokens(opening)).toBeGreaterThan(40);
    expect(engine.countTokens(opening)).toBeLessThan(MIN_COPY_TOKENS);
    const texts = ["Tom", "Ben", "Sue", "Max"].map((n) => `${opening} ${n} had a`);
    const run = await evaluatedPromptTokens(engine, texts);
    expect(run.copies).toBe(0);
    expect(run.prompt).toBeGreaterThanOrEqual(texts.reduce((n, t) => n + engine.countTokens(t), 0) - 4);
  });

  it("a copied prefix gives the same answer as an evaluated one", async () => {
    const [copying, plain] = [await make(1, true), await make(1, false)];
    const texts = prompts(4);
    const a = await Promise.all(texts.map((t) => copying.complete(t, greedy)));
    const b = await Promise.all(texts.map((t) => plain.complete(t, greedy)));
    expect(a.map((r) => r.text)).toEqual(b.map((r) => r.text));
  });
});
