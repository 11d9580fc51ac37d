// How much each part of the benchmark runs: the full run and --quick (bench/args.ts says how long each takes).
import { type BenchArgs, BenchUsageError } from "./args.js";
import { embeddingsWorkload, mixedWorkload, promptHeavyWorkload, uniformWorkload, type Workload } from "./peer.js";
import type { SchedulingCase } from "./scheduling.js";
import { schedulingWorkloads, TOKENS_PER_WORD } from "./scheduling-workloads.js";

export interface ModelPlan {
  /** Label in the table. */
  name: string;
  /** A GGUF path, or a generated preset. */
  source: { path: string } | { preset: string };
  /** The workload is 256 requests x 64 tokens; the big model runs fewer (said in the table). */
  requests: number;
  tokens: number;
  /** Hand-tuned baseline: sequence counts tried at threads 1 with each batching (llama-baseline.ts --batching). */
  handTuned: { default: number[]; ordered: number[]; lockstep: number[] };
  /** Thread counts probed beyond 1, for a few seconds only (they are far slower on small machines). */
  probeThreads: number[];
  /** Seconds after which probes and one-at-a-time runs start no new request; throughput is compared. */
  budgetSeconds: number;
  /** The project's engine at these sequence counts, for the chart. */
  engineSequences: number[];
  /** The model the prefix-reuse and embedding comparisons run on. */
  extras?: true;
}

export interface Plan {
  quick: boolean;
  models: ModelPlan[];
  /** The 50,000-line file of 1-token requests (the upload, memory, polling and overhead goals). */
  scaleLines: number;
  /** Engine-only run of the same 1-token requests, for the control-plane overhead. */
  overheadRequests: number;
  /** The distributed mode over an instant upstream: requests, shard size, worker counts, shards for the claim rate. */
  distributed: { requests: number; shardSize: number; workerCounts: number[]; claimShards: number };
  /** Rerank lines against llama-server --reranking on the generated reranker, and the slots it is swept over. */
  rerank: { lines: number; parallel: number[] } | null;
  /** Shared system prompt batch on the last (most realistic) model, reuse on and off. */
  prefixRequests: number;
  prefixTokens: number;
  /** Embedding inputs over 1 and 2 embedding contexts, on the last model (fewer on a bigger one). */
  embedInputs: number;
  /** The service against llama-server: per model, the workloads and llama-server's configurations swept. */
  peer: PeerPlan[];
  /** The service in front of llama-server (an upstream model) against a client with the best fixed concurrency. */
  upstream: UpstreamPlan[];
  /** The scheduling workloads against llama-server, with each scheduling part switched off in turn. */
  scheduling: SchedulingPlan[];
}

export interface SchedulingPlan {
  model: ModelPlan;
  cases: SchedulingCase[];
  grid: { parallel: number[]; threads: number[] };
  /** Also run the service with each scheduling part off (twice the time). */
  ablations: boolean;
}

/** The scheduling workloads at `lines` lines, with their goals: all share prefixes but the varied one. */
function schedulingCases(lines: number, perWord: number): SchedulingCase[] {
  return schedulingWorkloads(lines, perWord).map((workload) =>
    workload.name === "varied"
      ? { workload, goal: lines >= 2048 ? 1.15 : 1.0, sharesPrefixes: false }
      : { workload, goal: 1.3, sharesPrefixes: true },
  );
}

export interface UpstreamPlan {
  model: ModelPlan;
  requests: number;
  tokens: number;
  /** llama-server's slots and threads. */
  parallel: number;
  threads: number;
  /** The client's fixed concurrencies swept. */
  concurrencies: number[];
}

export interface PeerPlan {
  model: ModelPlan;
  workloads: Workload[];
  grid: { parallel: number[]; threads: number[] };
}

/**
 * `schedulingLines` runs the scheduling workloads at that many lines on every model, with one llama-server
 * configuration and no ablations (at 2,048 lines a `small` row takes many minutes).
 */
export function makePlan(quick: boolean, storiesPath: string | null, schedulingLines?: number): Plan {
  const models: ModelPlan[] = [];
  if (storiesPath) {
    models.push({
      name: "stories260K",
      source: { path: storiesPath },
      requests: quick ? 128 : 256,
      tokens: 64,
      handTuned: quick
        ? { default: [8], ordered: [], lockstep: [8, 32] }
        : { default: [1, 8, 16, 32, 64], ordered: [8, 32], lockstep: [8, 16, 32, 64] },
      probeThreads: [2],
      budgetSeconds: quick ? 4 : 8,
      engineSequences: quick ? [] : [1, 4, 8, 16, 32, 64],
    });
  }
  if (!quick || !storiesPath) {
    models.push({
      name: "small (generated, 8x512, Q8_0)",
      source: { preset: "small" },
      requests: quick ? 32 : 64,
      tokens: 64,
      handTuned: quick ? { default: [8], ordered: [], lockstep: [8] } : { default: [1, 8], ordered: [8], lockstep: [8, 16, 32] },
      probeThreads: quick ? [] : [2],
      budgetSeconds: quick ? 4 : 10,
      engineSequences: quick ? [] : [1, 8, 16, 32],
      extras: true,
    });
  }
  if (!quick) {
    // Real-model size: about 1 GFLOP per token, 505 MB of weights read per single-sequence step.
    models.push({
      name: "qwen2.5-0.5b (generated, 24x896, Q8_0)",
      source: { preset: "qwen2.5-0.5b" },
      requests: 64,
      tokens: 64,
      handTuned: { default: [], ordered: [], lockstep: [32, 64] },
      probeThreads: [2],
      budgetSeconds: 30,
      engineSequences: [],
    });
  }
  const grid = { parallel: quick ? [8, 16, 32] : [1, 8, 16, 32, 64], threads: [1, 2] };
  const peer: PeerPlan[] = models.map((m, i) => ({
    model: m,
    // The big model gets the uniform workload only, and no one-slot run (over two minutes each).
    workloads: m.name.startsWith("qwen")
      ? [uniformWorkload(m.requests, m.tokens)]
      : i === 0 && !quick
        ? [uniformWorkload(m.requests, m.tokens), mixedWorkload(), promptHeavyWorkload(256), embeddingsWorkload(2000)]
        : [uniformWorkload(m.requests, m.tokens), mixedWorkload()],
    grid: m.name.startsWith("qwen") ? { parallel: [16, 32, 64], threads: [1, 2] } : grid,
  }));
  // stories260K answers 16 tokens in a few ms: the service's own cost per request counts as much as it can
  // against the client's; the generated `small` model is a step towards a real one.
  const upstream: UpstreamPlan[] = models
    .filter((m) => m.name === "stories260K" || m.name.startsWith("small"))
    .map((m) => ({
      model: m,
      requests: m.name === "stories260K" ? (quick ? 256 : 4096) : quick ? 64 : 512,
      tokens: 16,
      parallel: 16,
      threads: 1,
      concurrencies: quick ? [8, 16, 32] : [4, 8, 16, 32, 64],
    }));
  // llama-server at 2 threads won every earlier row on `small` (README), and 1 thread is about half as fast there, so
  // the sweep is over slots; each of these runs takes minutes on 2 cores.
  const scheduling: SchedulingPlan[] = models
    .filter((m) => m.name.startsWith("small") || m.name === "stories260K")
    .map((m) => ({
      model: m,
      cases: schedulingCases(
        schedulingLines ?? (m.name === "stories260K" ? (quick ? 512 : 2048) : 512),
        m.name === "stories260K" ? TOKENS_PER_WORD.stories : TOKENS_PER_WORD.generated,
      ),
      // At 2,048 lines each run takes minutes even on stories260K: one llama-server configuration (16 slots won two
      // of three rows on `small`), and the parts' worth is measured on `small`'s 512 lines.
      grid: { parallel: quick || schedulingLines || m.name === "stories260K" ? [16] : [16, 32], threads: [2] },
      ablations: !schedulingLines && m.name !== "stories260K",
    }));
  return {
    quick,
    models,
    peer,
    upstream,
    scheduling,
    scaleLines: quick ? 10_000 : 50_000,
    overheadRequests: quick ? 5_000 : 20_000,
    distributed: { requests: quick ? 4_000 : 20_000, shardSize: 1_000, workerCounts: [1, 3], claimShards: quick ? 1_000 : 5_000 },
    rerank: { lines: quick ? 200 : 1000, parallel: quick ? [8] : [4, 8, 16] },
    prefixRequests: 128,
    prefixTokens: 16,
    embedInputs: extrasModel(models)?.source && "preset" in extrasModel(models)!.source ? 128 : 512,
  };
}

/** Where the prefix-reuse and embedding comparisons run: the model marked for them, else the last one. */
export function extrasModel(models: readonly ModelPlan[]): ModelPlan | undefined {
  return models.find((m) => m.extras) ?? models.at(-1);
}

/**
 * The plan cut to the models and workloads asked for (--model, --workloads) and the scheduling part's options; a
 * filter that leaves nothing to run is a mistake, said with the names it could have matched.
 */
export function narrowPlan(plan: Plan, by: Pick<BenchArgs, "model" | "workloads" | "slots" | "ablations">): Plan {
  const models = plan.models.map((m) => m.name);
  const workloads = [
    ...new Set([
      ...plan.peer.flatMap((p) => p.workloads.map((w) => w.name)),
      ...plan.scheduling.flatMap((s) => s.cases.map((c) => c.workload.name)),
      ...(plan.rerank ? ["rerank"] : []),
    ]),
  ];
  const has = (name: string) => !by.model || name.includes(by.model);
  const wanted = (name: string) => by.workloads.length === 0 || by.workloads.some((w) => name.includes(w));
  if (!models.some(has)) throw new BenchUsageError(`--model ${by.model} names none of this plan's models: ${models.join("; ")}`);
  const unknown = by.workloads.filter((w) => !workloads.some((name) => name.includes(w)));
  if (unknown.length > 0)
    throw new BenchUsageError(`--workloads ${unknown.join(",")} names none of this plan's workloads: ${workloads.join(", ")}`);
  return {
    ...plan,
    models: plan.models.filter((m) => has(m.name)),
    peer: plan.peer.filter((p) => has(p.model.name)).map((p) => ({ ...p, workloads: p.workloads.filter((w) => wanted(w.name)) })),
    upstream: plan.upstream.filter((u) => has(u.model.name)),
    scheduling: plan.scheduling
      .filter((s) => has(s.model.name))
      .map((s) => ({
        ...s,
        cases: s.cases.filter((c) => wanted(c.workload.name)),
        grid: by.slots ? { ...s.grid, parallel: by.slots } : s.grid,
        ablations: s.ablations && by.ablations,
      })),
  };
}
