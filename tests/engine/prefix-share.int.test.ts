// Prefix families on the real library: a shared prefix is evaluated once per context and copied to the other
// sequences (counted in the tokens the decodes evaluated), and the internal node-llama-cpp method it relies on is
// pinned, so an upgrade that changes it fails here instead of running slower unnoticed.
// Each case runs on the prebuilt binaries (copies wait for node-llama-cpp's context lock, so only long prefixes
// are copied) and, where it is built, on the patched build (copies queued into the next decode, kv-ops.ts).
import { LlamaContextSequence } from "node-llama-cpp";
import { afterAll, describe, expect, it } from "vitest";
import { createEngine, type Engine } from "../../engine/index.js";
import { MIN_COPY_TOKENS, MIN_QUEUED_COPY_TOKENS } from "../../engine/pool/prefix-share.js";
import { engineBuilds, NO_PATCHED_BUILD, testModelPath } from "../../testkit/model.js";

type Build = "prebuilt" | "patched";
const builds = await engineBuilds();
if (!builds.includes("patched")) console.warn(NO_PATCHED_BUILD);

const engines: Engine[] = [];
async function make(build: Build, contexts: number, prefixCopy: boolean, kvUnified = false): Promise<Engine> {
  const engine = await createEngine({
    modelPath: await testModelPath(),
    generatedModel: false,
    gpu: false,
    threads: 1,
    sequences: 4 * contexts,
    contexts,
    // Room for the prompts on either test model (the generated model's tokenizer takes more tokens than stories260K's).
    contextSize: 1024,
    embeddingContexts: 1,
    prefixCopy,
    build,
    kvUnified,
  });
  expect(engine.info.build).toBe(build);
  engines.push(engine);
  return engine;
}
afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
});
const minCopy = (build: Build) => (build === "patched" ? MIN_QUEUED_COPY_TOKENS : MIN_COPY_TOKENS);

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

it("node-llama-cpp 3.22.1 still has the internal copy the prebuilt build relies on, with the same shape", () => {
  const method = (LlamaContextSequence.prototype as unknown as Record<string, unknown>)._copyStateFromOtherSequence;
  expect(typeof method).toBe("function");
  expect((method as (...a: unknown[]) => unknown).length).toBe(2);
});

describe.each(builds)("prefix families (engine/pool/prefix-share.ts), %s build", (build) => {
  it("one context: the shared prefix is evaluated once, the other sequences copy it", async () => {
    const engine = await make(build, 1, true);
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
    const engine = await make(build, 1, false);
    expect(engine.info.prefixCopy).toBe(false);
    const prefixTokens = engine.countTokens(PREFIX);
    const run = await evaluatedPromptTokens(engine, prompts(4));
    expect(run.copies).toBe(0);
    expect(run.prompt).toBeGreaterThanOrEqual(4 * prefixTokens);
  });

  it("two contexts: the prefix is evaluated once per context, not once per sequence", async () => {
    const engine = await make(build, 2, true);
    const prefixTokens = engine.countTokens(PREFIX);
    const texts = prompts(8);
    const suffixes = texts.reduce((n, t) => n + engine.countTokens(t), 0) - 8 * prefixTokens;
    const run = await evaluatedPromptTokens(engine, texts);
    expect(run.copies).toBe(6);
    expect(run.prompt).toBeLessThanOrEqual(2 * prefixTokens + suffixes + 16);
  });

  it("a shared opening of some tens of tokens is copied only where copies are queued (patched), else evaluated by each", async () => {
    const engine = await make(build, 1, true);
    // A copy of this pays for itself in compute, but not for a wait on the context lock: some tens of tokens on
    // whichever tokenizer the test model has.
    let opening = "Once upon a time, there was a girl named Lily.";
    while (engine.countTokens(`${opening} She had a dog.`) < 64) opening += " She had a dog.";
    const openingTokens = engine.countTokens(opening);
    expect(openingTokens).toBeGreaterThan(40);
    expect(openingTokens).toBeLessThan(MIN_COPY_TOKENS);
    const texts = ["Tom", "Ben", "Sue", "Max"].map((n) => `${opening} ${n} had a`);
    const total = texts.reduce((n, t) => n + engine.countTokens(t), 0);
    const run = await evaluatedPromptTokens(engine, texts);
    if (openingTokens < minCopy(build)) {
      expect(run.copies).toBe(0);
      expect(run.prompt).toBeGreaterThanOrEqual(total - 4);
    } else {
      expect(run.copies).toBe(3);
      expect(run.prompt).toBeLessThanOrEqual(total - 3 * (openingTokens - 4));
    }
  });

  it("a copied prefix gives the same answer as an evaluated one", async () => {
    const [copying, plain] = [await make(build, 1, true), await make(build, 1, false)];
    const texts = prompts(4);
    const a = await Promise.all(texts.map((t) => copying.complete(t, greedy)));
    const b = await Promise.all(texts.map((t) => plain.complete(t, greedy)));
    expect(a.map((r) => r.text)).toEqual(b.map((r) => r.text));
  });
});
