// The shape every measured run is reported in, and the conversion from what the child scripts print.
import { mib, percentile } from "./stats.js";

export interface RunRecord {
  model: string;
  /** hand-tuned | service | sequential | engine | threads-probe | prefix | embeddings | scale | overhead */
  scenario: string;
  label: string;
  threads: number | null;
  sequences: number | null;
  requests: number;
  generated: number;
  seconds: number;
  tokensPerSecond: number;
  requestsPerSecond: number;
  p50Ms: number;
  p95Ms: number;
  peakRssMiB: number | null;
  extra?: Record<string, unknown>;
}

/** What bench/llama-baseline.ts and bench/engine-probe.ts print. */
export interface ChildResult {
  kind: string;
  threads: number;
  sequences: number;
  requests: number;
  seconds: number;
  generated: number;
  promptTokens: number;
  cachedTokens?: number;
  latenciesMs: number[];
  modelRss: number | null;
  peakRss: number | null;
  /** llama-baseline.ts: default | ordered | lockstep. */
  batching?: string;
  concurrency?: number;
  embeddingContexts?: number;
  prefixReuse?: boolean;
}

export function toRecord(model: string, scenario: string, label: string, r: ChildResult, extra?: Record<string, unknown>): RunRecord {
  return {
    model,
    scenario,
    label,
    threads: r.threads,
    sequences: r.sequences,
    requests: r.requests,
    generated: r.generated,
    seconds: r.seconds,
    tokensPerSecond: r.generated / r.seconds,
    requestsPerSecond: r.requests / r.seconds,
    p50Ms: percentile(r.latenciesMs, 50),
    p95Ms: percentile(r.latenciesMs, 95),
    peakRssMiB: mib(r.peakRss),
    extra,
  };
}

/** The faster of two runs of the same configuration (the machine is shared; the minimum is the least disturbed). */
export function faster(a: RunRecord, b: RunRecord | undefined): RunRecord {
  if (!b) return a;
  const best = b.seconds < a.seconds ? b : a;
  return { ...best, extra: { ...best.extra, runsSeconds: [a.seconds, b.seconds] } };
}
