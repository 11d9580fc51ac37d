// Targets 1 and 2 for one model: the service at its defaults against the best hand-tuned node-llama-cpp
// script (swept over threads and sequences) and against one request at a time;
// plus the project's engine over sequence counts for the chart.
import { threadsText } from "../engine/load/threads.js";
import { completionLines, prompt } from "../testkit/workload.js";
import { runChild } from "./child.js";
import type { ModelPlan } from "./plan.js";
import { type ChildResult, faster, type RunRecord, toRecord } from "./records.js";
import { startServer } from "./server.js";
import { runServiceBatch } from "./service-batch.js";
import { mib, percentile } from "./stats.js";

export interface ThroughputResult {
  model: string;
  modelPath: string;
  requests: number;
  tokens: number;
  handTuned: RunRecord[];
  probes: RunRecord[];
  best: RunRecord;
  service: RunRecord;
  /** One request at a time through the project's engine (its threads rule applied). */
  sequential: RunRecord;
  /** One request at a time on node-llama-cpp with its default threads: what an untuned script does. */
  sequentialDefaults: RunRecord;
  engine: RunRecord[];
  /** What the server chose and said about its backend. */
  serverEngine: Record<string, unknown>;
  backendLog: string | null;
  /** service seconds / best hand-tuned seconds (goal: <= 1.1). */
  ratioToBest: number;
  /** service tokens/s over sequential tokens/s (goal: >= 5). */
  speedupOverSequential: number;
  /** One request at a time on node-llama-cpp alone, 1 thread (the hand-tuned sweep's, or a budgeted run). */
  handTunedSingle: RunRecord;
  /**
   * What batching can gain on this machine at best: the best hand-tuned tokens/s over the best
   * one-request-at-a-time tokens/s (node-llama-cpp alone or the project engine). Target 2 cannot pass above it.
   */
  batchingCeiling: number;
  speedupOverSequentialDefaults: number;
}

type Log = (line: string) => void;

const BATCHING_LABEL: Record<string, string> = { ordered: "sequence order", lockstep: "sequence order + lockstep" };

export async function measureThroughput(plan: ModelPlan, modelPath: string, log: Log): Promise<ThroughputResult> {
  const { requests, tokens } = plan;
  const baseline = (threads: number, sequences: number, batching: string, budget = 0) =>
    runChild<ChildResult>("llama-baseline.ts", {
      model: modelPath,
      threads,
      sequences,
      requests,
      tokens,
      batching,
      "budget-seconds": budget,
    });
  const label = (r: ChildResult) =>
    `node-llama-cpp, ${r.threads} thread${r.threads > 1 ? "s" : ""}, ${r.sequences} seq${r.batching === "default" ? "" : `, ${BATCHING_LABEL[r.batching!]}`}`;
  const record = (scenario: string, r: ChildResult) => toRecord(plan.name, scenario, label(r), r, { batching: r.batching });

  const handTuned: RunRecord[] = [];
  for (const [batching, list] of Object.entries(plan.handTuned)) {
    for (const sequences of list) {
      const r = await baseline(1, sequences, batching);
      handTuned.push(record("hand-tuned", r));
      log(`  hand-tuned ${label(r)}: ${Math.round(r.generated / r.seconds)} tokens/s`);
    }
  }
  // Other thread counts at the best configuration found at 1 thread, for a few seconds each.
  const atOne = handTuned.reduce((a, b) => (b.tokensPerSecond > a.tokensPerSecond ? b : a));
  const probes: RunRecord[] = [];
  for (const threads of plan.probeThreads) {
    const r = await baseline(threads, atOne.sequences!, String(atOne.extra?.batching), plan.budgetSeconds);
    probes.push(record("threads-probe", r));
    log(
      `  threads probe ${label(r)} (${r.requests} requests in ~${plan.budgetSeconds} s): ${Math.round(r.generated / r.seconds)} tokens/s`,
    );
  }
  // The winner runs again (in full, if it was a short probe); the faster of its runs is the baseline.
  const top = [...handTuned, ...probes].reduce((a, b) => (b.tokensPerSecond > a.tokensPerSecond ? b : a));
  const again = await baseline(top.threads!, top.sequences!, String(top.extra?.batching));
  const rerun = record("hand-tuned", again);
  const best = top.scenario === "hand-tuned" ? faster(top, rerun) : rerun;
  log(`  best hand-tuned: ${best.label}, ${best.seconds.toFixed(2)} s`);

  const { service, serverEngine, backendLog } = await measureService(plan, modelPath, log);

  const budget = plan.budgetSeconds;
  const seq = await runChild<ChildResult>("engine-probe.ts", {
    mode: "complete",
    model: modelPath,
    requests,
    tokens,
    concurrency: 1,
    "budget-seconds": budget,
  });
  const sequential = toRecord(plan.name, "sequential", "one request at a time through the project engine", seq);
  log(`  one at a time, project engine: ${Math.round(sequential.tokensPerSecond)} tokens/s`);
  const serial = await baseline(0, 1, "default", budget);
  const sequentialDefaults = toRecord(
    plan.name,
    "sequential",
    `one request at a time, node-llama-cpp defaults (${serial.threads} threads)`,
    serial,
  );
  log(`  one at a time, node-llama-cpp defaults: ${Math.round(sequentialDefaults.tokensPerSecond)} tokens/s`);

  const handTunedSingle = handTuned.find((r) => r.sequences === 1) ?? record("hand-tuned", await baseline(1, 1, "default", budget));
  log(`  one at a time, node-llama-cpp 1 thread: ${Math.round(handTunedSingle.tokensPerSecond)} tokens/s`);
  const batchingCeiling = best.tokensPerSecond / Math.max(handTunedSingle.tokensPerSecond, sequential.tokensPerSecond);

  const engine: RunRecord[] = [];
  for (const sequences of plan.engineSequences) {
    const r = await runChild<ChildResult>("engine-probe.ts", { mode: "complete", model: modelPath, requests, tokens, sequences });
    engine.push(toRecord(plan.name, "engine", `project engine, ${r.sequences} seq, ${r.concurrency} in flight`, r));
    log(`  engine ${r.sequences} seq: ${Math.round(r.generated / r.seconds)} tokens/s`);
  }

  return {
    model: plan.name,
    modelPath,
    requests,
    tokens,
    handTuned,
    probes,
    best,
    service,
    sequential,
    sequentialDefaults,
    engine,
    serverEngine,
    backendLog,
    ratioToBest: service.seconds / best.seconds,
    speedupOverSequential: service.tokensPerSecond / sequential.tokensPerSecond,
    handTunedSingle,
    batchingCeiling,
    speedupOverSequentialDefaults: service.tokensPerSecond / sequentialDefaults.tokensPerSecond,
  };
}

/** The batch through a server started with MODEL_PATH only; two batches, the faster counts. */
async function measureService(plan: ModelPlan, modelPath: string, log: Log) {
  const server = await startServer(modelPath);
  try {
    const ready = (await (await fetch(`${server.baseUrl}/ready`)).json()) as { backend: { settings: Record<string, unknown> } };
    const engine = ready.backend.settings;
    const backendLog = /"msg":"(llama\.cpp backend: [^"]+)"/.exec(server.output())?.[1] ?? null;
    const lines = completionLines(plan.requests, { maxTokens: plan.tokens, prompt });
    const runs: RunRecord[] = [];
    for (let i = 0; i < 2; i++) {
      const r = await runServiceBatch(server, lines, { name: `run${i}` });
      const generated = r.batch.usage?.output_tokens ?? 0;
      runs.push({
        model: plan.name,
        scenario: "service",
        label: `service, defaults (${threadsText(Number(engine.threads), Number(engine.threadsLargeSteps ?? engine.threads))}, ${engine.sequences} seq)`,
        threads: Number(engine.threads),
        sequences: Number(engine.sequences),
        requests: plan.requests,
        generated,
        seconds: r.seconds,
        tokensPerSecond: generated / r.seconds,
        requestsPerSecond: plan.requests / r.seconds,
        p50Ms: percentile(r.latenciesMs, 50),
        p95Ms: percentile(r.latenciesMs, 95),
        peakRssMiB: mib(server.memory()?.peak),
        extra: { uploadMs: r.uploadMs, createMs: r.createMs, cachedTokens: r.batch.usage?.input_tokens_details?.cached_tokens },
      });
    }
    const service = faster(runs[0], runs[1]);
    log(
      `  service: ${Math.round(service.tokensPerSecond)} tokens/s, ${service.seconds.toFixed(2)} s (runs ${runs.map((r) => r.seconds.toFixed(2)).join(", ")} s)`,
    );
    return { service, serverEngine: engine, backendLog };
  } finally {
    await server.stop();
  }
}
