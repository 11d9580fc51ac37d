// REPRODUCIBLE: a seeded request gives the same answer whatever runs beside it or before it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine } from "../../engine/index.js";
import type { Engine } from "../../engine/types.js";
import { testModelPath } from "../../testkit/model.js";

let engine: Engine;
beforeAll(async () => {
  engine = await createEngine({
    modelPath: await testModelPath(),
    generatedModel: false,
    gpu: false,
    threads: 1,
    sequences: 4,
    contextSize: 256,
    embeddingContexts: 1,
    reproducible: true,
  });
});
afterAll(() => engine?.close());

const ask = (i: number, seed: number) =>
  engine.chat([{ role: "user", content: `Tell me story number ${i} about a cat.` }], { temperature: 1.2, seed, maxTokens: 40 });

describe("REPRODUCIBLE", () => {
  it("runs one sequence with no prefix cache, whatever SEQUENCES asks", () => {
    expect(engine.info).toMatchObject({ reproducible: true, sequences: 1 });
  });

  it("gives a seeded request the same answer alone, among others and after others", async () => {
    const alone = (await ask(0, 7)).text;
    const crowd = await Promise.all([ask(1, 1), ask(2, 2), ask(0, 7), ask(3, 3), ask(4, 4)]);
    expect(crowd[2].text).toBe(alone);
    expect(crowd[2].cachedPromptTokens).toBe(0);
    const again = await ask(0, 7);
    expect(again.text).toBe(alone);
  });
});
