// The engine asks V8 for a collection once enough native sampler memory may be waiting for one.
import { describe, expect, it } from "vitest";
import { loadLlama, loadModel } from "../../engine/load.js";
import { fullCollection, SamplerMemory, samplerBytes } from "../../engine/sampler-memory.js";
import { testModelPath } from "../helpers/model.js";

describe("SamplerMemory", () => {
  it("collects once per limit's worth of released samplers", () => {
    let collected = 0;
    const memory = new SamplerMemory(100, () => collected++, 1000);
    for (let i = 0; i < 25; i++) memory.released();
    expect(collected).toBe(2);
    expect(memory.collections).toBe(2);
  });

  it("does nothing where no collection can be asked for", () => {
    const memory = new SamplerMemory(100, null, 10);
    expect(() => memory.released()).not.toThrow();
    expect(memory.collections).toBe(0);
  });

  it("can reach V8's full collection in this process", () => {
    const gc = fullCollection();
    expect(gc).toBeTypeOf("function");
    expect(() => gc!()).not.toThrow();
  });

  it("sizes a sampler's buffer from the model's vocabulary: 12 bytes per token", async () => {
    const llama = await loadLlama(false, () => {});
    try {
      const model = await loadModel(llama, await testModelPath(), () => {});
      expect(samplerBytes(model) % 12).toBe(0);
      // Every vocabulary here holds at least the 256 byte tokens.
      expect(samplerBytes(model)).toBeGreaterThanOrEqual(256 * 12);
      await model.dispose();
    } finally {
      await llama.dispose();
    }
  });
});
