// The service against llama-server on the workloads where seeing the whole batch pays, and what each
// scheduling part is worth: the same service run with the line order switched off (BATCH_ORDER=file: no
// longest-first start, no family grouping, so no tail control either) and with prefix copies switched off
// (PREFIX_COPY=false). Cached prompt tokens are reported on both sides (llama-server's from its own log).

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { evaluatedPromptTokens, type PeerConfig, type PeerRun, runPeer, startLlamaServer, sweepPeer } from "../testkit/llama-server.js";
import { type Ceiling, familyShape, kernelCeiling } from "./ceiling.js";
import { runService, type ServiceRun, type Workload } from "./peer.js";

export interface SchedulingRow {
  model: string;
  workload: string;
  what: string;
  lines: number;
  peer: PeerRun[];
  best: PeerRun;
  service: ServiceRun;
  /** llama-server's best seconds / the service's: >= 1 means the service is at least as fast. */
  ratio: number;
  /** The service with one part switched off (absent where it cannot matter, e.g. copies without shared prefixes). */
  withoutOrder?: ServiceRun;
  withoutCopy?: ServiceRun;
  /** The service on node-llama-cpp's prebuilt binaries, where its default ran the patched build. */
  prebuilt?: ServiceRun;
  /** The service in front of llama-server's best configuration, and that configuration fed directly beside it. */
  inFront?: InFront;
  /** Prompt families only, where llama-batched-bench is built: the kernels' ceiling, and it over the service's time. */
  ceiling?: Ceiling & { ratio: number };
  goal: number;
}

/**
 * The service in front of llama-server's best configuration (an upstream model, max_in_flight = slots), or of
 * another slot count (`--front-slots`), against the same configuration fed directly, run in turn on fresh servers:
 * the sweep's best is the luckiest of its samples and was taken minutes earlier, so a ratio against it mixes the
 * feeder with the machine's drift.
 */
export interface InFront {
  /** llama-server's slots behind the service and in the runs beside it. */
  slots: number;
  front: ServiceRun;
  direct: PeerRun;
  /**
   * Where `slots` is not the sweep's best: its best configuration fed directly in each pair too, so that a wider
   * server's win is also measured against the fastest way to feed this one without the service.
   */
  bestDirect?: PeerRun;
  /** direct / front seconds, each side's best of its runs: >= 1 means the feeder helps its server. */
  ratio: number;
  /** Prompt tokens llama-server evaluated (its log) behind the service, the 4-line warm-up included; fewest of the runs. */
  frontEvaluated?: number;
  /**
   * Where lines share prefixes: the same configuration on the planned feed (testkit's drivePlanned), which knows the
   * whole batch ahead, run in each pair too; direct / planned is what the best feeding order wins there.
   */
  planned?: PeerRun;
  plannedRatio?: number;
}

export interface SchedulingCase {
  workload: Workload;
  /** The goal for this row: 1.3 for shared-prefix work, 1.15 for the varied 2,048, else 1.0. */
  goal: number;
  /** Whether the workload shares prefixes (the copy switch is measured only then). */
  sharesPrefixes: boolean;
}

/** The in-front pairs: how many, and llama-server's slots in them (default: the sweep's best). */
export interface FrontOptions {
  pairs: number;
  slots?: number;
}

export async function compareScheduling(
  binary: string,
  model: string,
  modelPath: string,
  c: SchedulingCase,
  grid: { parallel: number[]; threads: number[] },
  log: (line: string) => void,
  ablations = true,
  front: FrontOptions = { pairs: 1 },
  batchedBench: string | null = null,
): Promise<SchedulingRow> {
  const w = c.workload;
  log(`\n${model}, ${w.name} (${w.what}): llama-server swept, the service at its defaults, then with each part off`);
  const { runs, best } = await sweepPeer(binary, modelPath, w.requests, { ...grid, ctxPerSlot: w.ctxPerSlot }, log);
  const service = await runService(modelPath, w, 1);
  log(
    `  service: ${service.seconds.toFixed(2)} s, ${service.cachedTokens} cached prompt tokens: ${(best.seconds / service.seconds).toFixed(2)}x`,
  );
  const ceiling = batchedBench && w.name.startsWith("families") ? await ceilingOf(batchedBench, modelPath, w, service, log) : undefined;
  const prebuilt = service.build === "patched" ? await runService(modelPath, w, 1, { ENGINE_BUILD: "prebuilt" }) : undefined;
  if (prebuilt) log(`  ENGINE_BUILD=prebuilt: ${prebuilt.seconds.toFixed(2)} s, ${prebuilt.cachedTokens} cached`);
  const inFront = await compareInFront(binary, modelPath, w, best, front, c.sharesPrefixes, log);
  const withoutOrder = ablations ? await runService(modelPath, w, 1, { BATCH_ORDER: "file" }) : undefined;
  if (withoutOrder) log(`  BATCH_ORDER=file: ${withoutOrder.seconds.toFixed(2)} s`);
  const withoutCopy = ablations && c.sharesPrefixes ? await runService(modelPath, w, 1, { PREFIX_COPY: "false" }) : undefined;
  if (withoutCopy) log(`  PREFIX_COPY=false: ${withoutCopy.seconds.toFixed(2)} s, ${withoutCopy.cachedTokens} cached`);
  return {
    model,
    workload: w.name,
    what: w.what,
    lines: w.requests.length,
    peer: runs,
    best,
    service,
    ratio: best.seconds / service.seconds,
    withoutOrder,
    withoutCopy,
    prebuilt,
    inFront,
    ceiling,
    goal: c.goal,
  };
}

/** The row's ceiling; a tool that fails leaves the row without one (said in the log), not the part without its rows. */
async function ceilingOf(binary: string, modelPath: string, w: Workload, service: ServiceRun, log: (line: string) => void) {
  let ceiling: Ceiling;
  try {
    ceiling = kernelCeiling(binary, modelPath, await familyShape(modelPath, w));
  } catch (err) {
    log(`  the kernels' ceiling: not measured (${(err as Error).message.split("\n")[0]})`);
    return undefined;
  }
  const ratio = ceiling.seconds / service.seconds;
  log(
    `  the kernels' ceiling (llama-batched-bench -npp ${ceiling.shared} -ntg ${ceiling.maxTokens} -npl ${ceiling.lines} -pps -kvu ` +
      `-t ${ceiling.threads}): ${ceiling.familySeconds.toFixed(2)} s a family, ${ceiling.promptPerSecond.toFixed(0)} prompt tokens/s; ` +
      `${ceiling.families} families + ${ceiling.tails} tail tokens = ${ceiling.seconds.toFixed(2)} s: the service at ${(100 * ratio).toFixed(0)}%`,
  );
  return { ...ceiling, ratio };
}

/**
 * `pairs` times: llama-server fed directly, then the service in front of a fresh one, then (`withPlanned`) the
 * planned feed, then (at other slots than the best) the best configuration fed directly; each side's best counts.
 */
async function compareInFront(
  binary: string,
  modelPath: string,
  w: Workload,
  best: PeerRun,
  { pairs, slots = best.parallel }: FrontOptions,
  withPlanned: boolean,
  log: (line: string) => void,
): Promise<InFront> {
  const config: PeerConfig = { parallel: slots, threads: best.threads, ctxPerSlot: w.ctxPerSlot };
  const bestConfig: PeerConfig | undefined = slots === best.parallel ? undefined : { ...config, parallel: best.parallel };
  const tokens = (n: number | undefined) => (n === undefined ? "" : `, ${n} prompt tokens evaluated`);
  const evaluated = (r: PeerRun) => (r.cachedTokens === undefined ? undefined : r.promptTokens - r.cachedTokens);
  const fastest = <T extends { seconds: number }>(a: T | undefined, b: T | undefined) => (a && (!b || a.seconds < b.seconds) ? a : b);
  let direct: PeerRun | undefined;
  let front: ServiceRun | undefined;
  let frontEvaluated: number | undefined;
  let planned: PeerRun | undefined;
  let bestDirect: PeerRun | undefined;
  for (let k = 0; k < Math.max(1, pairs); k++) {
    const d = await runPeer(binary, modelPath, config, w.requests);
    const f = await runInFront(binary, modelPath, w, config);
    const p = withPlanned ? await runPeer(binary, modelPath, config, w.requests, "planned") : undefined;
    const b = bestConfig ? await runPeer(binary, modelPath, bestConfig, w.requests) : undefined;
    log(
      `  fed directly (${slots} slots): ${d.seconds.toFixed(2)} s${tokens(evaluated(d))}; ` +
        `the service in front: ${f.run.seconds.toFixed(2)} s${tokens(f.evaluated)}` +
        (p ? `; the planned feed: ${p.seconds.toFixed(2)} s${tokens(evaluated(p))}` : "") +
        (b ? `; ${best.parallel} slots fed directly: ${b.seconds.toFixed(2)} s` : ""),
    );
    direct = fastest(d, direct);
    front = fastest(f.run, front);
    planned = fastest(p, planned);
    bestDirect = fastest(b, bestDirect);
    if (f.evaluated !== undefined) frontEvaluated = Math.min(frontEvaluated ?? f.evaluated, f.evaluated);
  }
  const ratio = direct!.seconds / front!.seconds;
  const plannedRatio = planned ? direct!.seconds / planned.seconds : undefined;
  log(
    `  in front of llama-server: ${ratio.toFixed(2)}x (${front!.seconds.toFixed(2)} s against ${direct!.seconds.toFixed(2)} s)` +
      (plannedRatio ? `; the planned feed: ${plannedRatio.toFixed(2)}x (${planned!.seconds.toFixed(2)} s)` : "") +
      (bestDirect
        ? `; against ${best.parallel} slots fed directly (${bestDirect.seconds.toFixed(2)} s): the service ` +
          `${(bestDirect.seconds / front!.seconds).toFixed(2)}x` +
          (planned ? `, the planned feed ${(bestDirect.seconds / planned.seconds).toFixed(2)}x` : "")
        : ""),
  );
  return { slots, front: front!, direct: direct!, bestDirect, ratio, frontEvaluated, planned, plannedRatio };
}

/**
 * The service with llama-server as its upstream model, on a fresh llama-server of the given configuration,
 * with as many requests in flight as it has slots (its prefix routing at the default, auto).
 */
async function runInFront(binary: string, modelPath: string, w: Workload, config: PeerConfig) {
  const upstream = await startLlamaServer(binary, modelPath, config);
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-bench-front-"));
  try {
    const file = path.join(dir, "models.yaml");
    const limits = `min_in_flight: ${config.parallel}, max_in_flight: ${config.parallel}`;
    writeFileSync(
      file,
      `default_model: remote\nmodels:\n  - { name: remote, upstream: { base_urls: ["${upstream.baseUrl}/v1"], model: m, ${limits} } }\n`,
    );
    const run = await runService("", w, 1, { MODELS_FILE: file });
    return { run, evaluated: evaluatedPromptTokens(upstream.log()) };
  } finally {
    await upstream.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const s = (r: ServiceRun | PeerRun | undefined) => (r ? `${r.seconds.toFixed(1)} s` : "-");
const pct = (cached: number | undefined, prompt: number) =>
  cached === undefined ? "-" : `${cached.toLocaleString("en-US")} (${Math.round((100 * cached) / prompt)}%)`;

const inFrontCell = (f: InFront, bestSlots: number) =>
  `${s(f.front)} / ${s(f.direct)}: **${f.ratio.toFixed(2)}×**` +
  (f.plannedRatio ? ` (planned feed ${s(f.planned)}: ${f.plannedRatio.toFixed(2)}×)` : "") +
  (f.bestDirect
    ? ` on ${f.slots} slots; against ${bestSlots} fed directly (${s(f.bestDirect)}): ` +
      `${(f.bestDirect.seconds / f.front.seconds).toFixed(2)}×` +
      (f.planned ? `, planned ${(f.bestDirect.seconds / f.planned.seconds).toFixed(2)}×` : "")
    : "");

/** docs/performance.md's table: one row per workload. */
export function schedulingTable(rows: readonly SchedulingRow[]): string {
  const head = [
    "model, workload, lines",
    "llama-server best",
    "service (build)",
    "ratio (goal)",
    "prebuilt",
    "in front of llama-server / fed directly (planned feed)",
    "order off",
    "copies off",
    "kernels' ceiling: service at",
    "cached prompt tokens: llama-server / service",
  ];
  const lines = [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`];
  for (const r of rows) {
    const met = r.ratio >= r.goal ? "met" : "missed";
    lines.push(
      `| ${[
        `${r.model}, ${r.workload}, ${r.lines}`,
        `${s(r.best)} (${r.best.parallel} slots, ${r.best.threads} threads)`,
        `${s(r.service)} (${r.service.build ?? "?"})`,
        `**${r.ratio.toFixed(2)}×** (${r.goal.toFixed(2)}: ${met})`,
        s(r.prebuilt),
        r.inFront ? inFrontCell(r.inFront, r.best.parallel) : "-",
        s(r.withoutOrder),
        s(r.withoutCopy),
        r.ceiling ? `${r.ceiling.seconds.toFixed(1)} s: **${Math.round(100 * r.ceiling.ratio)}%**` : "-",
        `${pct(r.best.cachedTokens, r.best.promptTokens)} / ${pct(r.service.cachedTokens, r.service.promptTokens)}`,
      ].join(" | ")} |`,
    );
  }
  return lines.join("\n");
}
