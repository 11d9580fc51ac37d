// The summary every run ends with (testkit/timing-reporter.ts): each tier's wall time and the slowest files first;
// and the files' times the sequencer orders by.
import path from "node:path";
import { expect, it } from "vitest";
import { childrenMs, cpuMs } from "../../testkit/file-cpu.js";
import { repoFiles, repoRoot } from "../../testkit/repo-root.js";
import { LongestFirst, readDurations } from "../../testkit/test-order.js";
import { type FileTime, timingSummary } from "../../testkit/timing-reporter.js";

it("gives each tier its wall span, summed time and CPU, and lists the slowest files and the most CPU, most first", () => {
  const files: FileTime[] = [
    { file: "tests/a.int.test.ts", tier: "integration", ms: 30_000, endedAt: 40_000, cpuMs: 4_000 },
    { file: "tests/b.int.test.ts", tier: "integration", ms: 5_000, endedAt: 60_000, cpuMs: 9_000 },
    { file: "tests/c.unit.test.ts", tier: "unit", ms: 200, endedAt: 1_200, cpuMs: 150 },
    { file: "tests/d.sys.test.ts", tier: "system", ms: 50_000, endedAt: 70_000, cpuMs: 2_000 },
  ];
  const lines = timingSummary(files, 3);
  // integration: from 10 s (a's start) to 60 s (b's end).
  expect(lines.find((l) => l.includes("integration"))).toMatch(/2 files\s+wall\s+50\.0 s\s+files summed\s+35\.0 s\s+CPU 13\.0 s/);
  expect(lines.find((l) => l.includes("unit"))).toMatch(/1 files\s+wall\s+0\.2 s/);
  const listed = (title: string) =>
    lines
      .slice(lines.findIndex((l) => l.startsWith(title)) + 1)
      .slice(0, 3)
      .map((l) => l.trim().split(/\s+/).at(-1));
  expect(listed("The 3 slowest files:")).toEqual(["tests/d.sys.test.ts", "tests/a.int.test.ts", "tests/b.int.test.ts"]);
  expect(listed("The 3 files that used the most CPU")).toEqual(["tests/b.int.test.ts", "tests/a.int.test.ts", "tests/d.sys.test.ts"]);
  expect(timingSummary([])).toEqual([]);
  // A run whose files were not measured says nothing of CPU.
  const unmeasured = timingSummary(files.map(({ cpuMs: _, ...f }) => f));
  expect(unmeasured.some((l) => l.includes("CPU"))).toBe(false);
});

it("counts the CPU of this process and of the processes it waited for", () => {
  const [before, own] = [cpuMs(), process.cpuUsage()];
  const end = performance.now() + 50;
  while (performance.now() < end);
  const spent = process.cpuUsage(own);
  expect(spent.user + spent.system).toBeGreaterThan(0);
  // Its children's CPU only adds to its own (a machine that ran it little in those 50 ms gives less of both).
  expect(cpuMs() - before).toBeGreaterThanOrEqual((spent.user + spent.system) / 1000 - 1);
  // A process's stat with 250 and 150 ticks of its children's CPU (cutime, cstime): 4 s, whatever its name holds.
  expect(childrenMs("123 (a name) with) S 1 2 3 4 5 6 7 8 9 10 0 0 250 150 20 0 1 0 0 0")).toBe(4_000);
  expect(childrenMs(undefined)).toBe(0);
});

it("times only files that exist in tests/file-durations.json, which testkit/test-order.ts starts longest first", () => {
  const durations = readDurations();
  const files = new Set(repoFiles("tests", (name) => name.endsWith(".test.ts")));
  expect(Object.keys(durations).length).toBeGreaterThan(50);
  expect(
    Object.keys(durations).filter((f) => !files.has(f)),
    "a file moved or went: OBI_WRITE_DURATIONS=1 npm test",
  ).toEqual([]);
  for (const seconds of Object.values(durations)) expect(seconds).toBeGreaterThanOrEqual(0);
});

it("orders a run tier by tier (system, integration, unit), each longest first, so a worker keeps its modules", async () => {
  const durations = readDurations();
  const tierOf = { unit: "unit", int: "integration", sys: "system" } as Record<string, string>;
  const files = [...Object.keys(durations), "tests/not-yet-timed.sys.test.ts"].map((file) => ({
    moduleId: path.join(repoRoot, file),
    project: { name: tierOf[file.split(".").at(-3)!]! },
  }));
  const sorted = (await new LongestFirst({} as never).sort(files as never)).map((s) => path.relative(repoRoot, s.moduleId));
  const tiers = sorted.map((f) => tierOf[f.split(".").at(-3)!]);
  expect([...new Set(tiers)]).toEqual(["system", "integration", "unit"]);
  // Each tier's runs in one stretch, a file not yet timed first, then by the seconds in tests/file-durations.json.
  expect(tiers.filter((t, i) => t !== tiers[i - 1])).toEqual(["system", "integration", "unit"]);
  expect(sorted[0]).toBe("tests/not-yet-timed.sys.test.ts");
  for (let i = 2; i < sorted.length; i++)
    if (tiers[i] === tiers[i - 1]) expect(durations[sorted[i]!]).toBeLessThanOrEqual(durations[sorted[i - 1]!]!);
});
