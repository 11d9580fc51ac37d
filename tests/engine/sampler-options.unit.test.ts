// What the engine asks node-llama-cpp to sample with, read back through node-llama-cpp's own resolution of those
// options (the pinned 3.22.1's internal `_resolveSamplerConfig`, what its addon is configured from).
import { LlamaContextSequence } from "node-llama-cpp";
import { expect, it } from "vitest";
import { samplerOptions, tokenSeed } from "../../engine/generate/generate.js";

const resolve = (options: object): Record<string, unknown> =>
  (LlamaContextSequence.prototype as unknown as { _resolveSamplerConfig(o: object): Record<string, unknown> })._resolveSamplerConfig.call(
    { model: {} },
    options,
  );

it("OpenAI sampling reaches the addon with no top-k sampler at all, not one over the whole vocabulary or node-llama-cpp's 40", () => {
  const config = resolve(samplerOptions({ temperature: 1, topP: 1, topK: 0 }, 7, 1));
  expect(config).not.toHaveProperty("topK");
  expect(config).toMatchObject({ temperature: 1, topP: 1, minP: 0, seed: 7 });
});

it("a top_k asked for (Anthropic's) and a nucleus reach it as they are", () => {
  expect(resolve(samplerOptions({ temperature: 0.5, topP: 0.9, topK: 5 }, 1, 1))).toMatchObject({ temperature: 0.5, topP: 0.9, topK: 5 });
});

it("a token's seed is a function of the line's seed and the token's place, a different one for each place", () => {
  const seeds = Array.from({ length: 64 }, (_, i) => tokenSeed(42, i));
  expect(new Set(seeds).size).toBe(64);
  expect(seeds).toEqual(Array.from({ length: 64 }, (_, i) => tokenSeed(42, i)));
  expect(tokenSeed(43, 0)).not.toBe(seeds[0]);
  for (const s of seeds) expect(s >= 0 && s < 0xffffffff && Number.isInteger(s)).toBe(true);
});
