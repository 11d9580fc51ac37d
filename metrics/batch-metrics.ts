// What batches report as they run and end: lines and tokens by endpoint, engine throughput, time to finish,
// webhook deliveries, SLA decisions, stop rules, and engine time and its cost by model and pool.
import type { Progress } from "../pipeline/types.js";
import type { MetricKinds } from "./kinds.js";
import { RateWindow } from "./rate-window.js";

/** Engine throughput is averaged over this many seconds. */
const TOKEN_RATE_WINDOW_SECONDS = 10;
/** From a second to past OpenAI's 24h window. */
const TIME_TO_FINISH_BUCKETS = [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 48 * 3600];

/** What a batch that ended reports (the fields of the wire Batch these read). */
export interface EndedBatch {
  status: string;
  submitted_at: number;
  deadline_met: boolean | null;
  completed_at: number | null;
  failed_at: number | null;
  expired_at: number | null;
  cancelled_at: number | null;
}

/** What the control plane reports as batches run and end. */
export interface BatchMetrics {
  /** A batch entered a final status (completed, failed, expired, cancelled): its time to finish. */
  batchEnded(batch: EndedBatch): void;
  /** Returns the onProgress hook of one run; `base` is what was already on disk (a resume). */
  trackProgress(endpoint: string, base: Progress): (p: Progress) => void;
  /** One webhook delivery attempt's outcome. */
  webhookAttempt(outcome: "delivered" | "failed" | "gave_up"): void;
  /** An SLA decision: a shard yielded its slot (by the pool it left), or a batch's deadline found at risk. */
  slaEvent(kind: "yield" | "at_risk", pool?: string | null): void;
  /** A stop rule ended a batch (`max_error_rate`, `max_cost`, `max_output_tokens`). */
  batchStopped(rule: string): void;
  /** Engine time a commit added (seconds a slot of `pool` was held), and its cost at the model's price. */
  engineWork(w: { model: string; pool: string | null; seconds: number; cost: { currency: string; amount: number } | null }): void;
}

export interface BatchTotals {
  /** Since start: completion tokens generated and requests finished (completed or failed), for rates over time. */
  totals(): { completionTokens: number; requests: number };
}

export function createBatchMetrics(kinds: MetricKinds, now?: () => number): BatchMetrics & BatchTotals {
  const total = { completionTokens: 0, requests: 0 };
  const { counter } = kinds;
  const webhooks = counter("webhook_deliveries_total", "Webhook delivery attempts by outcome (delivered, failed, gave_up).", ["outcome"]);
  const slaYields = counter("sla_yields_total", "Running shards that yielded their slot to a more urgent batch, by the pool they left.", [
    "pool",
  ]);
  const slaAtRisk = counter(
    "sla_at_risk_total",
    "Batches whose projected finish passed their deadline while they ran (the leader's count).",
    [],
  );
  const stops = counter("batch_stops_total", "Batches a stop rule ended failed, by rule.", ["rule"]);
  const engineSeconds = counter(
    "engine_seconds_total",
    "Seconds batches' shards held a slot, by model and pool (committed work; pool none: outside the pools).",
    ["model", "pool"],
  );
  const spent = counter("cost_total", "What that work cost at the model's price in the models file, by model, pool and currency.", [
    "model",
    "pool",
    "currency",
  ]);
  const timeToFinish = kinds.histogram(
    "batch_time_to_finish_seconds",
    "From submission to the final status, per batch.",
    ["status"],
    TIME_TO_FINISH_BUCKETS,
  );
  const trackProgress = progressCounters(kinds, total, now);
  return {
    batchEnded(b) {
      // Counted where the batch ended (the cluster's totals come from the state).
      const ended = b.completed_at ?? b.failed_at ?? b.expired_at ?? b.cancelled_at;
      if (ended !== null) timeToFinish.observe({ status: b.status }, Math.max(0, ended - b.submitted_at));
    },
    totals() {
      return { ...total };
    },
    webhookAttempt(outcome) {
      webhooks.inc({ outcome });
    },
    slaEvent(kind, pool) {
      if (kind === "yield") slaYields.inc({ pool: pool ?? "none" });
      else slaAtRisk.inc();
    },
    batchStopped(rule) {
      stops.inc({ rule });
    },
    engineWork({ model, pool, seconds, cost }) {
      const labels = { model, pool: pool ?? "none" };
      if (seconds > 0) engineSeconds.inc(labels, seconds);
      if (cost && cost.amount > 0) spent.inc({ ...labels, currency: cost.currency }, cost.amount);
    },
    trackProgress,
  };
}

/**
 * Requests run and tokens processed, counted from each batch run's progress as it goes (the delta since the last
 * report), with the completion-token rate over a recent window.
 */
function progressCounters(
  kinds: MetricKinds,
  total: { completionTokens: number; requests: number },
  now?: () => number,
): BatchMetrics["trackProgress"] {
  const tokenRate = new RateWindow(TOKEN_RATE_WINDOW_SECONDS, now);
  const { counter } = kinds;
  const requests = counter("batch_requests_total", "Requests (batch lines) run, by endpoint and outcome.", ["endpoint", "outcome"]);
  const promptTokens = counter("prompt_tokens_total", "Prompt tokens processed.", ["endpoint"]);
  const completionTokens = counter("completion_tokens_total", "Completion tokens generated.", ["endpoint"]);
  kinds.liveGauge(
    "engine_tokens_per_second",
    `Completion tokens generated per second, averaged over the last ${TOKEN_RATE_WINDOW_SECONDS} seconds.`,
    (g) => g.set(tokenRate.rate()),
  );
  return (endpoint, base) => {
    let last = base;
    return (p) => {
      const done = p.completed - last.completed;
      const failed = p.failed - last.failed;
      const prompt = p.usage.promptTokens - last.usage.promptTokens;
      const completion = p.usage.completionTokens - last.usage.completionTokens;
      if (done + failed > 0) total.requests += done + failed;
      if (done > 0) requests.inc({ endpoint, outcome: "completed" }, done);
      if (failed > 0) requests.inc({ endpoint, outcome: "failed" }, failed);
      if (prompt > 0) promptTokens.inc({ endpoint }, prompt);
      if (completion > 0) {
        completionTokens.inc({ endpoint }, completion);
        tokenRate.add(completion);
        total.completionTokens += completion;
      }
      last = p;
    };
  };
}
