import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    // Each integration file loads a real model; two cores cannot run many at once.
    maxWorkers: 2,
    // As npm start runs node: the engine frees node-llama-cpp's sampler buffers through global.gc (engine/sampler-memory.ts).
    execArgv: ["--expose-gc"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
