import { defineConfig } from "vitest/config";
import { testTiers } from "./tests/tiers.js";

// Three tiers (tests/README.md), told from what each file uses (tests/tiers.ts): `npm test` runs them all,
// `npm run test:unit` and `npm run test:integration` one each (`vitest run --project system` the last).
const tiers = testTiers(import.meta.dirname);
const filesOf = (tier: string) => [...tiers].filter(([, t]) => t === tier).map(([f]) => f);

export default defineConfig({
  test: {
    // Each integration file loads a real model; two cores cannot run many at once.
    maxWorkers: 2,
    // As npm start runs node: the engine frees node-llama-cpp's sampler buffers through global.gc (engine/sampler-memory.ts).
    execArgv: ["--expose-gc"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: ["unit", "integration", "system"].map((name) => ({
      extends: true,
      // OBI_TEST_TIER lets the testkit refuse a model to a unit test (testkit/model.ts).
      test: { name, include: filesOf(name), env: { OBI_TEST_TIER: name } },
    })),
  },
});
