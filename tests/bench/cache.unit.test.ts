// The cache part's machinery without a model: its batches repeat exactly the share asked for, its sizes are set from
// the command line (a typo refused), and its goals read right: a runner that reused nothing is no result rather
// than a miss, the changed job is allowed its fixed costs, and the store's memory is judged on its own pages.
import { describe, expect, it } from "vitest";
import { BenchUsageError, benchArgs } from "../../bench/args.js";
import { type CacheResult, repeatLines } from "../../bench/cache.js";
import { cacheTargets, formatTable, targetsOf } from "../../bench/report.js";

const batch = (label: string, seconds: number, generated = 640) => ({ label, requests: 40, generated, seconds });
const job = (label: string, seconds: number) => ({ label, seconds, summary: "this run: 50 requests in 2.0s" });

function result(dataset: Partial<CacheResult["dataset"]> = {}): CacheResult {
  return {
    model: "small",
    plan: {
      lines: 40,
      repeatShare: 0.4,
      maxTokens: 16,
      jobMaxTokens: 4,
      rounds: 1,
      rows: 50,
      changedShare: 0.02,
      storeCounts: [100, 1000],
      lookups: 200,
      pgEntries: 100,
    },
    repeats: { off: batch("off", 2), on: batch("on", 1), ratio: 2 },
    noRepeats: { off: batch("off", 2), on: batch("on", 2.02), ratio: 2 / 2.02 },
    dataset: { first: job("first", 100), unchanged: job("again", 1.5), changed: job("changed", 9), reuse: true, ...dataset },
    store: {
      rss: [
        { entries: 100, rssMiB: 90, anonMiB: 40, fileMiB: 50, heapMiB: 10, fillSeconds: 0.1 },
        { entries: 1000, rssMiB: 400, anonMiB: 60, fileMiB: 340, heapMiB: 10, fillSeconds: 1 },
      ],
      lookups: [{ store: "embedded", entries: 1000, lookups: 200, perSecond: 30000, misses: 0 }],
    },
  };
}

const byId = (c: CacheResult) => Object.fromEntries(cacheTargets(c).map((t) => [t.id, t]));

describe("the cache part of the bench", () => {
  it("repeats the share of lines asked for, every custom_id its own, spread through the file", () => {
    const lines = repeatLines(2000, 0.4, 16, "r");
    expect(lines).toHaveLength(2000);
    expect(new Set(lines.map((l) => l.custom_id)).size).toBe(2000);
    expect(new Set(lines.map((l) => JSON.stringify(l.body))).size).toBe(1200);
    expect(lines.every((l) => l.body.temperature === 0 && l.body.max_tokens === 16)).toBe(true);
    // Not the distinct lines then their copies: a copy's first half holds some of each.
    const seen = new Set<string>();
    const firstHalfRepeats = lines.slice(0, 1000).filter((l) => seen.has(JSON.stringify(l.body)) || !seen.add(JSON.stringify(l.body)));
    expect(firstHalfRepeats.length).toBeGreaterThan(100);
    // Another salt shares no line with it: no batch of the part finds another's answers.
    const other = new Set(repeatLines(2000, 0, 16, "d0on").map((l) => l.body.prompt));
    expect(lines.some((l) => other.has(l.body.prompt))).toBe(false);
  });

  it("takes its sizes from the command line, and refuses a count that is no count", () => {
    const a = benchArgs([
      "--only",
      "cache",
      "--cache-lines",
      "40",
      "--cache-rows",
      "50",
      "--cache-entries",
      "100,1000",
      "--cache-lookups",
      "200",
    ]);
    if (a === "help") throw new Error("help");
    expect([...a.parts]).toEqual(["cache"]);
    expect(a).toMatchObject({ cacheLines: 40, cacheRows: 50, cacheEntries: [100, 1000], cacheLookups: 200, cacheRounds: undefined });
    for (const [argv, said] of [
      [["--cache-lines", "2k"], '--cache-lines takes a whole number of at least 1, not "2k"'],
      [["--cache-entries", "1000000,10000"], "--cache-entries takes growing counts"],
      [["--cache-rows", "0"], "--cache-rows takes a whole number"],
    ] as const) {
      expect(() => benchArgs([...argv])).toThrow(BenchUsageError);
      expect(() => benchArgs([...argv])).toThrow(said);
    }
  });

  it("judges each row, with a runner that reused nothing as no result rather than a miss", () => {
    const t = byId(result());
    expect(t["cache repeats"].met).toBe(true);
    expect(t["cache empty"]).toMatchObject({ met: true, measured: "2.02 s / 2.00 s = 1.010x the time" });
    expect(t["cache rerun"]).toMatchObject({ met: true, measured: "100.00 s / 1.50 s = 66.7x" });
    // 9 s against 10% of 100 s plus the 1.5 s the unchanged re-run spends computing nothing.
    expect(t["cache changed"]).toMatchObject({ met: true, goal: "<= 10% + fixed = 11.50 s" });
    expect(t["cache memory"].met).toBe(true);
    expect(t["cache lookups embedded"].met).toBe(true);

    const none = byId(result({ unchanged: job("again", 110), changed: job("changed", 105), reuse: false }));
    for (const id of ["cache rerun", "cache changed"]) {
      expect(none[id].met).toBeNull();
      expect(none[id].unsound).toMatch(/^no reuse: the job run again took 110\.0 s against 100\.0 s/);
    }
  });

  it("misses where the process's own memory grows, not where LMDB's mapped pages do, and where a lookup misses", () => {
    const c = result();
    c.store.rss[1] = { ...c.store.rss[1], anonMiB: 140 };
    c.store.lookups[0].misses = 3;
    const t = byId(c);
    expect(t["cache memory"]).toMatchObject({ met: false });
    expect(t["cache memory"].measured).toContain("anonymous 40 -> 140 MiB (+100)");
    expect(t["cache lookups embedded"].met).toBe(false);
  });

  it("prints its runs in the one table, each goal under it", () => {
    const res = {
      startedAt: "",
      quick: false,
      machine: { cpus: 2, cpuModel: "x", memoryGiB: 1, node: "v20", nodeLlamaCpp: "3", loadAverageAtStart: [] },
      peer: [],
      scheduling: [],
      upstream: [],
      throughput: [],
      scale: null,
      prefix: null,
      embeddings: null,
      cache: result({ reuse: false }),
      gpu: { backendLog: null, ready: null, note: "" },
      notes: [],
    };
    const table = formatTable({ ...res, targets: targetsOf(res) });
    expect(table).toContain("cache: off");
    expect(table).toContain("2.00x faster");
    expect(table).toContain("embedded, 1,000 answers");
    expect(table).toMatch(/NO RESULT cache rerun .*no reuse/);
    expect(table).toMatch(/MET {4}cache repeats/);
  });
});
