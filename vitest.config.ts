import { defineConfig } from "vitest/config";
import { LongestFirst } from "./testkit/test-order.js";

// Three tiers (tests/README.md), named in each file's name as `<name>.<tier>.test.ts`:
// - unit: neither a model nor a process; seconds;
// - int (integration): the real engine in this process (a model is loaded);
// - sys (system): processes, PostgreSQL, S3, Chromium, a loop-mounted disk or llama-server.
// `npm test` runs them all, `npm run test:unit`, `test:integration` and `test:system` one each.
// tests/tiers.unit.test.ts fails on a test file with no tier, or a unit file that loads a model or starts a process.
const TIERS = { unit: "unit", integration: "int", system: "sys" } as const;

/**
 * System files that need a module graph of their own: a binding no Llama used before (llama.cpp's log reaches only
 * a binding's first Llama). They run in a project of their own, named after the tier (testkit/timing-reporter.ts).
 */
const OWN_MODULE_GRAPH = ["tests/engine/micro-batches-llama.sys.test.ts"];

/**
 * The environment of every test file and the processes it starts. Flash attention on: the test model's 8-wide heads
 * leave it off by default (engine/index.ts), yet on the tests' short prompts and longer answers it took about a
 * fifth less CPU a token, and the suite's time is its tokens (tests/README.md). The engine's own tests, which load
 * it in this process, keep the default rule.
 */
const TEST_ENV = { FLASH_ATTENTION: "true" };

export default defineConfig({
  test: {
    // One more than the cores: much of a system file's time is spent waiting (on a lease to lapse, a process to
    // start, a download's pace), which the others' work fills. With four the CPU was already all taken, and the
    // files' processes then spent more of it switching: the suite took longer (tests/README.md).
    maxWorkers: 3,
    // As npm start runs node: the engine frees node-llama-cpp's sampler buffers through global.gc (engine/generate/sampler-memory.ts).
    // V8 waits for eight times the work it waits by default (--interrupt-budget, 67,584 in Node 20's V8) before its
    // optimizing compiler takes a function: the run is CPU-bound on 2 cores, and most of a test process's life is
    // its start (modules loaded, a few requests), where that compiler spent about a sixth of the CPU on functions
    // then run a few times. A service's start to /ready took 1.9 s of CPU with it against 2.2 s without; the unit
    // and integration tiers 248 s against 289 s. The processes tests start get it too (testkit/entry.ts).
    execArgv: ["--expose-gc", "--interrupt-budget=540672"],
    testTimeout: 60_000,
    // Each tier's time and the ten slowest files after every run (testkit/timing-reporter.ts).
    reporters: ["default", "./testkit/timing-reporter.ts"],
    // Each file's CPU, for the reporter's summary (testkit/file-cpu.ts).
    setupFiles: ["./testkit/file-cpu.ts"],
    sequence: { sequencer: LongestFirst },
    hookTimeout: 60_000,
    projects: [
      ...Object.entries(TIERS).map(([name, tag]) => ({
        extends: true as const,
        // OBI_TEST_TIER lets the testkit refuse a model to a unit test (testkit/model.ts).
        test: {
          name,
          include: [`tests/**/*.${tag}.test.ts`],
          exclude: OWN_MODULE_GRAPH,
          env: { ...TEST_ENV, OBI_TEST_TIER: name },
          // Files share each worker's modules rather than import the service's code, node-llama-cpp's binding, the
          // clients and the testkit once per file: most of the unit tier's time went to imports, a third of the
          // integration tier's CPU, and a second of a core per system file. So a file closes what it opens and
          // restores what it sets.
          isolate: false,
          // The processes system tests start run the product compiled once per run (testkit/entry.ts).
          ...(name === "system" ? { globalSetup: ["./testkit/build-setup.ts"] } : {}),
        },
      })),
      {
        extends: true as const,
        // The system files that need a module graph of their own, each in a fresh one.
        test: { name: "system-own-graph", include: OWN_MODULE_GRAPH, env: { ...TEST_ENV, OBI_TEST_TIER: "system" }, isolate: true },
      },
    ],
  },
});
