// Prefix reuse can be switched off (the benchmark measures what it gains), and families' prefixes outlive requests
// of other families: a prompt sharing only a few opening tokens with a sequence's cache takes another sequence.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, type Engine } from "../../engine/index.js";
import { testModelPath } from "../../testkit/model.js";

const engines: Engine[] = [];
const make = async (prefixReuse: boolean, sequences = 2) => {
  const engine = await createEngine({
    modelPath: await testModelPath(),
    generatedModel: false,
    gpu: false,
    threads: 1,
    sequences,
    contextSize: 256,
    embeddingContexts: 1,
    prefixReuse,
  });
  engines.push(engine);
  return engine;
};
let on: Engine;
let off: Engine;
let single: Engine;
let eight: Engine;
beforeAll(async () => {
  [on, off, single, eight] = [await make(true), await make(false), await make(true, 1), await make(true, 8)];
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

  it("a freed sequence goes to the waiting request that shares its cache, not to the oldest waiter", async () => {
    const story = "Once upon a time, there was a little girl named Lily. She loved to play in the park with her dog";
    const other = "The big red truck drove down the hill and stopped at the old farm near the river bank";
    const running = single.complete(story, greedy);
    // Both wait for the one sequence; the second shares the running prompt's first ~20 tokens.
    const oldest = single.complete(`${other} every day.`, greedy);
    const sharing = single.complete(`${story} every day.`, greedy);
    const order: string[] = [];
    await Promise.all([running, oldest.then(() => order.push("oldest")), sharing.then(() => order.push("sharing"))]);
    expect(order).toEqual(["sharing", "oldest"]);
    const s = await sharing;
    expect(s.cachedPromptTokens).toBeGreaterThan(15);
  });

  it("keeps each family's prefix while other families come one at a time, as long as there are free sequences", async () => {
    const opening = [
      "Tom had a red ball",
      "The sun was hot",
      "A cat sat on a mat",
      "Mom baked a cake",
      "Ben saw a big dog",
      "Sue lost her hat",
    ];
    const family = (f: number, i: number) =>
      `${opening[f]} and ${opening[f].toLowerCase()} again, said the story. Question ${i}: what next?`;
    // Six families in turn, each once; then each again: they find their prefixes, not evicted by the others.
    for (let f = 0; f < 6; f++) await eight.complete(family(f, 0), greedy);
    const cached: number[] = [];
    for (let f = 0; f < 6; f++) cached.push((await eight.complete(family(f, 1), greedy)).cachedPromptTokens);
    // Before a sequence was taken by its cache's share of the prompt, a shared BOS made the last sequence freed
    // the best, and every family evicted the one before: none of the six reused anything. One of the six can
    // still lose its prefix here (not traced yet).
    expect(cached.filter((n) => n > 10).length).toBeGreaterThanOrEqual(5);
  });
});
