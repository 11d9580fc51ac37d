// The cache part of the bench run for real at tiny sizes (the generated `small` model, two server processes, three
// runner processes, the stores' own process and, where installed, a throwaway PostgreSQL): every row does its work
// and every goal gets a verdict or a reason. What the numbers are is the bench's business, not this test's.
import { describe, expect, it } from "vitest";
import { measureCache } from "../../bench/cache.js";
import { cacheTargets } from "../../bench/report.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { POSTGRES_BIN } from "../../testkit/postgres.js";

describe("npm run bench -- --only cache, at tiny sizes", () => {
  it("runs every row of the part and judges each", { timeout: 300_000 }, async () => {
    const model = { name: "small", path: await ensureGeneratedModel({ preset: "small" }) };
    const lines: string[] = [];
    const plan = {
      lines: 20,
      repeatShare: 0.4,
      maxTokens: 4,
      jobMaxTokens: 2,
      rounds: 1,
      rows: 30,
      changedShare: 0.1,
      storeCounts: [100, 1000],
      lookups: 100,
      pgEntries: 50,
    };
    const c = await measureCache(model, plan, (l) => lines.push(l));
    for (const r of [c.repeats.on, c.repeats.off, c.noRepeats.on, c.noRepeats.off]) {
      expect(r.requests).toBe(20);
      expect(r.generated).toBeGreaterThan(0);
      expect(r.seconds).toBeGreaterThan(0);
    }
    for (const r of [c.dataset.first, c.dataset.changed]) expect(r.summary).toMatch(/^this run: \d+ requests/);
    // Run again unchanged, the job is answered whole: no request runs.
    expect(c.dataset.unchanged.summary).toMatch(/: 30 rows \(30 answered from the result cache: /);
    expect(c.store.rss.map((r) => r.entries)).toEqual([100, 1000]);
    expect(c.store.rss.every((r) => r.rssMiB > 0 && r.anonMiB > 0)).toBe(true);
    expect(c.store.lookups.map((l) => l.store)).toEqual(POSTGRES_BIN ? ["embedded", "postgres"] : ["embedded"]);
    expect(c.store.lookups.every((l) => l.misses === 0 && l.perSecond > 0)).toBe(true);
    const targets = cacheTargets(c);
    expect(targets.map((t) => t.id)).toEqual([
      "cache repeats",
      "cache empty",
      "cache rerun",
      "cache changed",
      "cache memory",
      ...c.store.lookups.map((l) => `cache lookups ${l.store}`),
    ]);
    for (const t of targets) expect(t.met !== null || /^no reuse: /.test(t.unsound ?? ""), `${t.id}: ${t.unsound}`).toBe(true);
    expect(lines.join("\n")).toMatch(/repeats: .*metadata\.cache off [\d.]+ s; .*collapsed [\d.]+ s: [\d.]+x/);
  });
});
