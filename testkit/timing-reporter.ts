// A vitest reporter that ends every run with each tier's wall time and CPU, the ten slowest test files and the ten
// that used the most CPU, so a slow test is seen the run it lands (vitest.config.ts adds it beside the default
// reporter).
import { writeFileSync } from "node:fs";
import type { Reporter, TestModule } from "vitest/node";
import { DURATIONS_FILE, readDurations } from "./test-order.js";

export interface FileTime {
  file: string;
  tier: string;
  /** Import, setup, hooks and tests: the file's time on its worker. */
  ms: number;
  /** When it ended, in ms since the epoch. */
  endedAt: number;
  /** Its CPU and its processes' (testkit/file-cpu.ts); absent where it was not measured. */
  cpuMs?: number;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * The summary's lines: per tier its files, wall span (first file's start to last file's end), summed file time and
 * summed CPU; then the slowest files, and the files that used the most CPU.
 */
export function timingSummary(files: readonly FileTime[], slowest = 10): string[] {
  if (files.length === 0) return [];
  const lines = ["Time by tier (wall: first file's start to last file's end; one tier's last files overlap the next one's first):"];
  for (const tier of [...new Set(files.map((f) => f.tier))].sort()) {
    const own = files.filter((f) => f.tier === tier);
    const wall = Math.max(...own.map((f) => f.endedAt)) - Math.min(...own.map((f) => f.endedAt - f.ms));
    const sum = own.reduce((a, f) => a + f.ms, 0);
    const cpu = own.some((f) => f.cpuMs !== undefined) ? `  CPU ${seconds(own.reduce((a, f) => a + (f.cpuMs ?? 0), 0))}` : "";
    lines.push(
      `  ${tier.padEnd(12)} ${String(own.length).padStart(4)} files  wall ${seconds(wall).padStart(9)}  files summed ${seconds(sum).padStart(9)}${cpu}`,
    );
  }
  const ranked = (title: string, ms: (f: FileTime) => number) => [
    `The ${Math.min(slowest, files.length)} ${title}:`,
    ...[...files]
      .sort((a, b) => ms(b) - ms(a))
      .slice(0, slowest)
      .map((f) => `  ${seconds(ms(f)).padStart(9)}  ${f.tier.padEnd(12)} ${f.file}`),
  ];
  lines.push(...ranked("slowest files", (f) => f.ms));
  if (files.some((f) => f.cpuMs !== undefined))
    lines.push(...ranked("files that used the most CPU (theirs and their processes')", (f) => f.cpuMs ?? 0));
  return lines;
}

/** Merged into what the file holds, so a run of some files updates theirs and keeps the others'. */
function writeDurations(files: readonly FileTime[]): void {
  const kept = readDurations();
  for (const f of files) kept[f.file] = Math.round(f.ms / 100) / 10;
  const sorted = Object.fromEntries(Object.entries(kept).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(DURATIONS_FILE, `${JSON.stringify(sorted, null, 2)}\n`);
}

function fileTime(module: TestModule, endedAt: number): FileTime {
  const d = module.diagnostic();
  const ms = d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration + d.duration;
  // A tier's projects are named after it: "system-own-graph" is the system tier's.
  const tier = (module.project.name || "default").split("-")[0]!;
  const { cpuMs } = module.meta();
  return { file: module.relativeModuleId, tier, ms, endedAt, ...(cpuMs !== undefined ? { cpuMs } : {}) };
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
    // Every file's time and CPU, for comparing two runs file by file.
    const all = process.env.OBI_TIMES_FILE;
    if (all) writeFileSync(all, `${JSON.stringify(files, null, 1)}\n`);
  }
}
