import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

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

const root = path.dirname(fileURLToPath(import.meta.url));
/** Each file's seconds in a whole run, kept by `OBI_WRITE_DURATIONS=1 npm test` (testkit/timing-reporter.ts). */
const DURATIONS_FILE = path.join(root, "tests/file-durations.json");
const durations: Record<string, number> = existsSync(DURATIONS_FILE) ? JSON.parse(readFileSync(DURATIONS_FILE, "utf8")) : {};

/** The projects in the order their files run: see LongestFirst. */
const TIER_ORDER = ["system", "system-own-graph", "integration", "unit"];

/**
 * One tier after another (system, then integration, then unit), each longest file first. Vitest (4.1) keeps a
 * worker, and the modules it imported, for the next file only when that file is of the same project; otherwise it
 * ends the worker and starts another, which imports the testkit, the clients and the engine again. Interleaved by
 * length alone, the tiers started about a hundred workers in a run (import summed 122 s against 44 s in one; the
 * whole run 745 s against 700 s). The system files still fill both cores among themselves, and the tail is short
 * files. Longest first so that none begins while another worker has nothing left to do: vitest orders so from its
 * own cache, which a fresh clone (CI's) lacks. A file not yet timed starts first in its tier, unless it is a unit
 * file (seconds).
 */
export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seconds = (f: TestSpecification) => {
      const file = path.relative(root, f.moduleId).split(path.sep).join("/");
      return durations[file] ?? (file.endsWith(".unit.test.ts") ? 0 : 1e9);
    };
    const tier = (f: TestSpecification) => TIER_ORDER.indexOf(f.project.name);
    return [...files].sort((a, b) => tier(a) - tier(b) || seconds(b) - seconds(a) || a.moduleId.localeCompare(b.moduleId));
  }
}

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
