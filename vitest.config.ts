import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { defineConfig } from "vitest/config";

// Three tiers (tests/README.md), told from what each file uses, so a file cannot sit in the wrong one:
// - system: processes, PostgreSQL, S3, Chromium, a loop-mounted disk or llama-server (child processes, root);
// - integration: the real engine in this process (a model is loaded);
// - unit: neither; seconds, no model.
// `npm test` runs them all, `npm run test:unit`, `test:integration` and `test:system` one each.
type Tier = "unit" | "integration" | "system";

const SYSTEM =
  /\b(spawn|spawnSync|execFile|startMain|spawnMain|spawnServer|startChild|startPostgres|startS3|S3rver|s3rver|launchChromium|haveChromium|loopDisk|llamaServer|startLlamaServer|startService|startSupervised|oneMachineCampaign|distributedCampaign|startCluster)\b|helpers\/(process|cluster|browser|loop-disk|server-testbed)\.js|testkit\/(postgres|s3|llama-server)\.js/;
const INTEGRATION =
  /\b(startTestService|testModelPath|testModel|testEngine|openTestEngine|openGeneratedEngine|controlTestbed|buildService|loadLlama|getLlama|createEngine|LlamaEngine|loadBackend|engineBuilds|startNode|tinyEngine)\b|helpers\/service\.js|testkit\/model\.js|engine\/index\.js|helpers\/test-engine\.js|helpers\/embedded-plane\.js/;

function tierOf(text: string): Tier {
  if (SYSTEM.test(text)) return "system";
  if (INTEGRATION.test(text)) return "integration";
  return "unit";
}

/** Every test file (relative to the repository root) with its tier. */
function testTiers(root: string): Map<string, Tier> {
  const out = new Map<string, Tier>();
  const walk = (dir: string) => {
    for (const e of readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith(".test.ts")) out.set(rel, tierOf(readFileSync(path.join(root, rel), "utf8")));
    }
  };
  walk("tests");
  return out;
}

const tiers = testTiers(import.meta.dirname);
const filesOf = (tier: Tier) => [...tiers].filter(([, t]) => t === tier).map(([f]) => f);

export default defineConfig({
  test: {
    // Each integration file loads a real model; two cores cannot run many at once.
    maxWorkers: 2,
    // As npm start runs node: the engine frees node-llama-cpp's sampler buffers through global.gc (engine/sampler-memory.ts).
    execArgv: ["--expose-gc"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: (["unit", "integration", "system"] as const).map((name) => ({
      extends: true,
      // OBI_TEST_TIER lets the testkit refuse a model to a unit test (testkit/model.ts).
      test: { name, include: filesOf(name), env: { OBI_TEST_TIER: name } },
    })),
  },
});
