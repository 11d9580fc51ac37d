// The runner's measured rates (runner/rates.ts): what a run computed, recorded per model, the last runs' rate read
// back, and a missing or torn file read as no measurement.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { computedWork, measuredRunnerRate, recordRate, runWork } from "../../runner/rates.js";

const root = mkdtempSync(path.join(os.tmpdir(), "obi-runner-rates-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const usage = (promptTokens: number, completionTokens: number, cachedTokens = 0) => ({ promptTokens, completionTokens, cachedTokens });

describe("the runner's measured rates", () => {
  it("counts the work a run computed: not the cache's answers, the prefixes reused or the run it resumed", () => {
    expect(computedWork(usage(800, 100), undefined)).toBe(200);
    expect(computedWork(usage(800, 100, 400), { lines: 2, outputTokens: 40 })).toBe(110);
    const base = { completed: 1, failed: 0, usage: usage(80, 10) };
    expect(runWork({ completed: 5, failed: 0, usage: usage(800, 100) }, base)).toBe(180);
    expect(runWork(base, base)).toBe(0);
  });

  it("reads each model's rate over its recorded runs, and the default before any", async () => {
    const dir = path.join(root, "a");
    expect(await measuredRunnerRate(dir, "m")).toEqual({ workPerSecond: 100, runs: 0 });
    await recordRate(dir, "m", 300, 10);
    await recordRate(dir, "m", 500, 10);
    await recordRate(dir, "m", 1_000, 1.5);
    await recordRate(dir, "m", 0, 30);
    await recordRate(dir, "n", 10, 10);
    expect(await measuredRunnerRate(dir, "m")).toEqual({ workPerSecond: 40, runs: 2 });
    expect(await measuredRunnerRate(dir, "n")).toEqual({ workPerSecond: 1, runs: 1 });
  });

  it("keeps a model's last 20 runs", async () => {
    const dir = path.join(root, "b");
    for (let i = 0; i < 25; i++) await recordRate(dir, "m", i < 5 ? 1_000_000 : 100, 10);
    expect(await measuredRunnerRate(dir, "m")).toEqual({ workPerSecond: 10, runs: 20 });
    expect(JSON.parse(readFileSync(path.join(dir, "runner-rates.json"), "utf8")).m).toHaveLength(20);
  });

  it("reads a torn or foreign file as no measurement, and records over it", async () => {
    const dir = path.join(root, "c");
    await recordRate(dir, "m", 100, 10);
    for (const text of ['{"m": [{"work": 1', "[1, 2]", '{"m": "fast"}', '{"m": [null, {"work": -5, "seconds": 9}]}']) {
      writeFileSync(path.join(dir, "runner-rates.json"), text);
      expect(await measuredRunnerRate(dir, "m")).toEqual({ workPerSecond: 100, runs: 0 });
    }
    await recordRate(dir, "m", 200, 10);
    expect(await measuredRunnerRate(dir, "m")).toEqual({ workPerSecond: 20, runs: 1 });
  });
});
