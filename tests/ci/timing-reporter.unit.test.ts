// The summary every run ends with (testkit/timing-reporter.ts): each tier's wall time and the slowest files first.
import { expect, it } from "vitest";
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
