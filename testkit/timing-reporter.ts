// A vitest reporter that ends every run with each tier's wall time and the ten slowest test files, so a slow test
// is seen the run it lands (vitest.config.ts adds it beside the default reporter).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Reporter, TestModule } from "vitest/node";
import { repoRoot } from "./repo-root.js";

/** Each file's seconds, which vitest.config.ts's sequencer starts longest first (a fresh clone has no vitest cache). */
const DURATIONS_FILE = path.join(repoRoot, "tests/file-durations.json");

export interface FileTime {
  file: string;
  tier: string;
  /** Import, setup, hooks and tests: the file's time on its worker. */
  ms: number;
  /** When it ended, in ms since the epoch. */
  endedAt: number;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The summary's lines: per tier its files, wall span (first file's start to last file's end) and summed file time. */
export function timingSummary(files: readonly FileTime[], slowest = 10): string[] {
  if (files.length === 0) return [];
  const lines = ["Time by tier (wall: first file's start to last file's end; tiers overlap in one run):"];
  for (const tier of [...new Set(files.map((f) => f.tier))].sort()) {
    const own = files.filter((f) => f.tier === tier);
    const wall = Math.max(...own.map((f) => f.endedAt)) - Math.min(...own.map((f) => f.endedAt - f.ms));
    const sum = own.reduce((a, f) => a + f.ms, 0);
    lines.push(
      `  ${tier.padEnd(12)} ${String(own.length).padStart(4)} files  wall ${seconds(wall).padStart(9)}  files summed ${seconds(sum)}`,
    );
  }
  lines.push(`The ${Math.min(slowest, files.length)} slowest files:`);
  for (const f of [...files].sort((a, b) => b.ms - a.ms).slice(0, slowest))
    lines.push(`  ${seconds(f.ms).padStart(9)}  ${f.tier.padEnd(12)} ${f.file}`);
  return lines;
}

/** Merged into what the file holds, so a run of some files updates theirs and keeps the others'. */
function writeDurations(files: readonly FileTime[]): void {
  const kept: Record<string, number> = existsSync(DURATIONS_FILE) ? JSON.parse(readFileSync(DURATIONS_FILE, "utf8")) : {};
  for (const f of files) kept[f.file] = Math.round(f.ms / 100) / 10;
  const sorted = Object.fromEntries(Object.entries(kept).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(DURATIONS_FILE, `${JSON.stringify(sorted, null, 2)}\n`);
}

function fileTime(module: TestModule, endedAt: number): FileTime {
  const d = module.diagnostic();
  const ms = d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration + d.duration;
  // A tier's projects are named after it: "system-own-graph" is the system tier's.
  const tier = (module.project.name || "default").split("-")[0]!;
  return { file: module.relativeModuleId, tier, ms, endedAt };
}

export default class TimingReporter implements Reporter {
  private readonly ended = new Map<string, number>();

  onTestModuleEnd(module: TestModule): void {
    this.ended.set(module.moduleId, Date.now());
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const files = modules.map((m) => fileTime(m, this.ended.get(m.moduleId) ?? Date.now()));
    const lines = timingSummary(files);
    if (lines.length > 0) console.log(`\n${lines.join("\n")}`);
    if (process.env.OBI_WRITE_DURATIONS === "1") writeDurations(files);
  }
}
