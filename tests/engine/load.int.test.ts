// Bringing the engine up on whatever machine runs the tests: never a build, never a crash for want of a GPU.
import { describe, expect, it } from "vitest";
import { createEngine } from "../../engine/index.js";
import { testModelPath } from "../../testkit/model.js";

describe("createEngine", () => {
  it("falls back to the CPU when the named GPU backend cannot be loaded, and says so", async () => {
    const logs: string[] = [];
    const engine = await createEngine({
      modelPath: await testModelPath(),
      generatedModel: false,
      gpu: "vulkan",
      threads: 1,
      sequences: 1,
      contextSize: 64,
      embeddingContexts: 1,
      log: (msg) => logs.push(msg),
    });
    try {
      expect(["vulkan", false]).toContain(engine.info.gpu);
      expect(logs.some((l) => l.startsWith("llama.cpp backend:"))).toBe(true);
      if (engine.info.gpu === false) expect(logs.some((l) => l.includes("falling back to CPU"))).toBe(true);
      expect(engine.info.threads).toBe(1);
      expect((await engine.complete("Once", { temperature: 0, maxTokens: 2 })).completionTokens).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
    await expect(engine.complete("Once", {})).rejects.toMatchObject({ code: "engine_closed" });
  });

  it("refuses a missing model file with a clear message", async () => {
    await expect(
      createEngine({
        modelPath: "/nonexistent/model.gguf",
        generatedModel: false,
        gpu: false,
        threads: 1,
        sequences: 1,
        contextSize: 64,
        embeddingContexts: 1,
      }),
    ).rejects.toThrow(/Model file not found/);
  });
});
