// Prefix reuse can be switched off (the benchmark measures what it gains).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, type Engine } from "../../engine/index.js";
import { testModelPath } from "../helpers/model.js";

const engines: Engine[] = [];
const make = async (prefixReuse: boolean) => {
  const engine = await createEngine({
    modelPath: await testModelPath(),
    generatedModel: false,
    gpu: false,
    threads: 1,
    sequences: 2,
    contextSize: 256,
    embeddingContexts: 1,
    prefixReuse,
  });
  engines.push(engine);
  return engine;
};
let on: Engine;
let off: Engine;
beforeAll(async () => {
  [on, off] = [await make(true), await make(false)];
});
afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
});

describe("prefixReuse", () => {
  const prompt = "Once upon a time, there was a little girl named Lily. She loved to play";
  const greedy = { temperature: 0, maxTokens: 12 };

  it("off: every request evaluates its whole prompt; on: the repeated prompt comes from the cache", async () => {
    const first = await off.complete(prompt, greedy);
    const second = await off.complete(prompt, greedy);
    expect(first.cachedPromptTokens).toBe(0);
    expect(second.cachedPromptTokens).toBe(0);
    expect(second.text).toBe(first.text);
    await on.complete(prompt, greedy);
    const again = await on.complete(prompt, greedy);
    expect(again.cachedPromptTokens).toBe(again.promptTokens - 1);
  });
});
