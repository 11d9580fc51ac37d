// The order of a test run's files (vitest.config.ts's sequencer): one tier after another, each longest file first.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { repoRoot } from "./repo-root.js";

/** Each file's seconds in a whole run, kept by `OBI_WRITE_DURATIONS=1 npm test` (testkit/timing-reporter.ts). */
export const DURATIONS_FILE = path.join(repoRoot, "tests/file-durations.json");

/** The seconds in DURATIONS_FILE by file (relative to the repository, `/`-separated); none where it is absent. */
export const readDurations = (): Record<string, number> =>
  existsSync(DURATIONS_FILE) ? JSON.parse(readFileSync(DURATIONS_FILE, "utf8")) : {};

/** The projects (vitest.config.ts) in the order their files run. */
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
  private readonly durations = readDurations();

  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seconds = (f: TestSpecification) => {
      const file = path.relative(repoRoot, f.moduleId).split(path.sep).join("/");
      return this.durations[file] ?? (file.endsWith(".unit.test.ts") ? 0 : 1e9);
    };
    const tier = (f: TestSpecification) => TIER_ORDER.indexOf(f.project.name);
    return [...files].sort((a, b) => tier(a) - tier(b) || seconds(b) - seconds(a) || a.moduleId.localeCompare(b.moduleId));
  }
}
