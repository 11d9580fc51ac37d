// The bench's table of goals: a ratio stands only between runs that did the same work, so a baseline that generated
// one token in 22.5 s gives no result (it printed "MET ... 7066.8x"), and each part's time is printed.
import { describe, expect, it } from "vitest";
import type { LanesResult } from "../../bench/lanes.js";
import type { RunRecord } from "../../bench/records.js";
import { type BenchResults, formatTable, targetsOf, unsoundPair } from "../../bench/report.js";
import type { SchedulingRow } from "../../bench/scheduling.js";
import type { ThroughputResult } from "../../bench/throughput.js";

const run = (label: string, requests: number, generated: number, seconds: number): RunRecord => ({
  model: "stories260K",
  scenario: "x",
  label,
  threads: 1,
  sequences: 1,
  requests,
  generated,
  seconds,
  tokensPerSecond: generated / seconds,
  requestsPerSecond: requests / seconds,
  p50Ms: 1,
  p95Ms: 1,
  peakRssMiB: 100,
});

function throughput(sequentialDefaults: RunRecord): ThroughputResult {
  const service = run("service", 128, 128 * 64, 1.36);
  const best = run("hand-tuned", 128, 128 * 64, 2.69);
  const sequential = run("one at a time", 40, 40 * 64, 8);
  return {
    model: "stories260K",
    modelPath: "/m.gguf",
    requests: 128,
    tokens: 64,
    handTuned: [best],
    probes: [],
    best,
    service,
    sequential,
    sequentialDefaults,
    engine: [],
    serverEngine: {},
    backendLog: null,
    ratioToBest: service.seconds / best.seconds,
    speedupOverSequential: service.tokensPerSecond / sequential.tokensPerSecond,
    handTunedSingle: sequential,
    batchingCeiling: 2,
    speedupOverSequentialDefaults: service.tokensPerSecond / sequentialDefaults.tokensPerSecond,
  };
}

const results = (t: ThroughputResult): Omit<BenchResults, "targets"> => ({
  startedAt: "2026-11-29T00:00:00Z",
  quick: true,
  machine: { cpus: 2, cpuModel: "x", memoryGiB: 24, node: "v20", nodeLlamaCpp: "3.22.1", loadAverageAtStart: [0] },
  peer: [],
  scheduling: [],
  upstream: [],
  throughput: [t],
  scale: null,
  prefix: null,
  embeddings: null,
  gpu: { backendLog: null, ready: null, note: "" },
  notes: [],
});

describe("the bench's goals", () => {
  it("gives no result for a ratio over a baseline of 1 token in 22.5 s, and says why", () => {
    const broken = results(throughput(run("node-llama-cpp defaults", 1, 1, 22.5)));
    const targets = targetsOf(broken);
    const untuned = targets.find((t) => t.id === "untuned")!;
    expect(untuned.met).toBeNull();
    expect(untuned.unsound).toMatch(/generated 1 token\(s\) in 1 request\(s\) over 22\.5 s, 1\.0 a request against 64\.0/);
    const table = formatTable({ ...broken, targets });
    expect(table).toMatch(/NO RESULT untuned .*not the same work/);
    expect(table).not.toMatch(/7,?066|MET\s+untuned/);
    // The goals whose runs are sound still stand.
    expect(targets.find((t) => t.id === "hand-tuned")!.met).toBe(true);
    expect(targets.find((t) => t.id === "batching")!.met).toBe(true);
  });

  it("judges a sound baseline as before: met or missed", () => {
    const sound = targetsOf(results(throughput(run("node-llama-cpp defaults", 3, 3 * 64, 40))));
    expect(sound.find((t) => t.id === "untuned")).toMatchObject({ met: true });
    expect(sound.every((t) => t.unsound === undefined)).toBe(true);
  });

  it("compares runs only when both did work of the same size", () => {
    const side = (label: string, requests: number, generated: number, seconds = 1) => ({ label, requests, generated, seconds });
    expect(unsoundPair(side("a", 10, 640), side("b", 12, 700))).toBeNull();
    expect(unsoundPair(side("a", 10, 0), side("b", 10, 0))).toBeNull();
    expect(unsoundPair(side("a", 0, 0), side("b", 10, 640))).toBe("a finished no request in 1.0 s");
    expect(unsoundPair(side("a", 10, 640, 0), side("b", 10, 640))).toBe("a ran no measurable time");
    expect(unsoundPair(side("a", 10, 0), side("b", 10, 640))).toMatch(/^a generated 0 token/);
  });

  it("prints how long each part took", () => {
    const r = results(throughput(run("d", 3, 192, 40)));
    const table = formatTable({ ...r, targets: targetsOf(r), partSeconds: { peer: 1510, lanes: 300 } });
    expect(table).toContain("Time by part: peer 1510 s, lanes 300 s");
  });

  it("judges a families row against the kernels' ceiling: 85% of it or more", () => {
    const base = results(throughput(run("node-llama-cpp defaults", 40, 40 * 64, 8)));
    const shape = { families: 8, lines: 64, shared: 402, tails: 14_000, maxTokens: 37, threads: 2, promptPerSecond: 3_800 };
    const row = (service: number, ceiling: number) =>
      ({
        model: "small",
        workload: "families-8",
        service: { seconds: service },
        ceiling: { ...shape, familySeconds: 1.7, seconds: ceiling, ratio: ceiling / service },
      }) as unknown as SchedulingRow;
    const judged = (service: number, ceiling: number) =>
      targetsOf({ ...base, scheduling: [row(service, ceiling)] }).find((t) => t.id === "ceiling families-8")!;
    expect(judged(18.9, 17.2)).toMatchObject({ met: true, measured: "17.20 s / 18.90 s = 91%", goal: ">= 85%" });
    expect(judged(21.3, 15.1).met).toBe(false);
    // No ceiling (the tool not built, or not a families workload): no goal.
    expect(targetsOf({ ...base, scheduling: [{ ...row(18.9, 17.2), ceiling: undefined }] }).some((t) => t.id.startsWith("ceiling"))).toBe(
      false,
    );
  });

  it("misses the lanes' TTFT goal when requests were turned away, whatever the answered ones' p99", () => {
    const base = results(throughput(run("node-llama-cpp defaults", 40, 40 * 64, 8)));
    const plan = {
      lines: 128,
      lineTokens: 128,
      rate: 4,
      interactiveTokens: 64,
      promptSentences: 2,
      idleRequests: 10,
      slots: 16,
      threads: 1,
    };
    const lanes = (refused: number): LanesResult => ({
      model: "qwen",
      plan,
      promptTokens: 200,
      service: {
        idle: { linesPerSecond: null, batchSeconds: null, ttft: { p50Ms: 100, p99Ms: 200, n: 10, refused: 0 } },
        alone: { linesPerSecond: 2, batchSeconds: 64, ttft: null },
        mixed: { linesPerSecond: 1.8, batchSeconds: 71, ttft: { p50Ms: 150, p99Ms: 300, n: 200, refused }, build: "patched" },
      },
      peer: {
        idle: { linesPerSecond: null, batchSeconds: null, ttft: { p50Ms: 100, p99Ms: 200, n: 10 } },
        alone: { linesPerSecond: 1, batchSeconds: 128, ttft: null },
        mixed: { linesPerSecond: 0.5, batchSeconds: 256, ttft: { p50Ms: 9000, p99Ms: 20000, n: 300 } },
      },
    });
    const ttft = (refused: number) => targetsOf({ ...base, lanes: lanes(refused) }).find((t) => t.id === "lanes ttft")!;
    expect(ttft(0).met).toBe(true);
    expect(ttft(12)).toMatchObject({ met: false });
    expect(ttft(12).measured).toContain("12 of 212 refused");
    const peer = targetsOf({ ...base, lanes: lanes(12) }).find((t) => t.id === "lanes peer")!;
    expect(peer.met).toBe(false);
    // The requests' own work as batch lines: 128 of the 200 answered, 9.6 s on the batch alone's 64 s, at 4 a second:
    // 1 - 4 x 0.075 = 0.70, said beside the goal (the measured 0.90x above it: flagged) and as a row.
    const work = (batchSeconds: number) => ({
      ...lanes(0),
      work: { requests: 128, batchSeconds, bound: 1 - (4 * (batchSeconds - 64)) / 128 },
    });
    const batch = targetsOf({ ...base, lanes: work(73.6) }).find((t) => t.id === "lanes batch")!;
    expect(batch).toMatchObject({ met: true, goal: ">= 0.85x" });
    expect(batch.measured).toContain(
      "estimate from the 128 requests as batch lines: their own work leaves the batch at most about 0.70x of its pace",
    );
    expect(batch.measured).toContain("measured above it: the runs' pace differed");
    const table = formatTable({ ...base, lanes: work(73.6), targets: [], partSeconds: {} });
    // Which engine build a run was on is said in its row: ENGINE_BUILD=auto falls back to prebuilt silently.
    expect(table).toContain("lanes: service (patched), batch + 4 interactive/s");
    expect(table).toMatch(/lanes: service, batch \+ the 128 requests as its lines \|\s+256 .*73\.60 s: their own work leaves/);
    // Requests that ask more than the machine: no share is left, said as such rather than as a negative ratio.
    const over = targetsOf({ ...base, lanes: work(104) }).find((t) => t.id === "lanes batch")!;
    expect(over.measured).toContain("the requests alone ask 1.25x of the machine: nothing is left for the batch");
  });
});
