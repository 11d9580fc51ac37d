// The summary every run ends with (testkit/timing-reporter.ts): each tier's wall time and the slowest files first;
// and the files' times the sequencer orders by.
import { readFileSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { repoFiles, repoRoot } from "../../testkit/repo-root.js";
import { type FileTime, timingSummary } from "../../testkit/timing-reporter.js";

it("gives each tier its wall span and summed time, and lists the slowest files, slowest first", () => {
  const files: FileTime[] = [
    { file: "tests/a.int.test.ts", tier: "integration", ms: 30_000, endedAt: 40_000 },
    { file: "tests/b.int.test.ts", tier: "integration", ms: 5_000, endedAt: 60_000 },
    { file: "tests/c.unit.test.ts", tier: "unit", ms: 200, endedAt: 1_200 },
    { file: "tests/d.sys.test.ts", tier: "system", ms: 50_000, endedAt: 70_000 },
  ];
  const lines = timingSummary(files, 3);
  // integration: from 10 s (a's start) to 60 s (b's end).
  expect(lines.find((l) => l.includes("integration"))).toMatch(/2 files\s+wall\s+50\.0 s\s+files summed 35\.0 s/);
  expect(lines.find((l) => l.includes("unit"))).toMatch(/1 files\s+wall\s+0\.2 s/);
  const slow = lines.slice(lines.indexOf("The 3 slowest files:") + 1);
  expect(slow.map((l) => l.trim().split(/\s+/).at(-1))).toEqual(["tests/d.sys.test.ts", "tests/a.int.test.ts", "tests/b.int.test.ts"]);
  expect(timingSummary([])).toEqual([]);
});

it("times only files that exist in tests/file-durations.json, which vitest.config.ts starts longest first", () => {
  const durations = JSON.parse(readFileSync(path.join(repoRoot, "tests/file-durations.json"), "utf8")) as Record<string, number>;
  const files = new Set(repoFiles("tests", (name) => name.endsWith(".test.ts")));
  expect(Object.keys(durations).length).toBeGreaterThan(50);
  expect(
    Object.keys(durations).filter((f) => !files.has(f)),
    "a file moved or went: OBI_WRITE_DURATIONS=1 npm test",
  ).toEqual([]);
  for (const seconds of Object.values(durations)) expect(seconds).toBeGreaterThanOrEqual(0);
});
