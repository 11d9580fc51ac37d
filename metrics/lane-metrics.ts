// The synchronous lanes' metrics: requests by tier and outcome (a 429 is "refused"), time to first token and time
// per output token by tier and model, and each lane's running and waiting requests read at scrape time.
import type { MetricKinds } from "./kinds.js";

/** From 10 ms to a minute: an interactive first token should come in well under a second; a flex one may wait. */
const FIRST_TOKEN_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const PER_TOKEN_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

export type LaneOutcome = "completed" | "refused" | "invalid" | "failed" | "disconnected";

export interface LaneState {
  tier: string;
  model: string;
  running: number;
  waiting: number;
}

export interface LaneMetrics {
  laneRequest(tier: string, model: string, outcome: LaneOutcome): void;
  /** A request that generated: seconds to its first token, and per token after it (undefined with one token or none). */
  laneLatency(tier: string, model: string, firstTokenSeconds: number, perTokenSeconds?: number): void;
  /** The lanes as they stand, read at scrape time. */
  watchLanes(read: () => LaneState[]): void;
  /** A batch of the model turned at risk of its deadline: the interactive lane gave back its share. */
  laneTakeback(model: string): void;
  /** Each local model's batch lines that gave their sequence to an interactive request since start, read at scrape time. */
  watchPreemptions(read: () => Array<{ model: string; count: number }>): void;
}

export function createLaneMetrics(kinds: MetricKinds): LaneMetrics {
  let lanes: () => LaneState[] = () => [];
  let preemptions: () => Array<{ model: string; count: number }> = () => [];
  const requests = kinds.counter(
    "sync_requests_total",
    "Synchronous requests by tier (default, flex), model and outcome (completed, refused with a 429, invalid with a 400, failed, disconnected).",
    ["tier", "model", "outcome"],
  );
  const firstToken = kinds.histogram(
    "sync_time_to_first_token_seconds",
    "Synchronous requests: seconds from arrival to the first generated token, by tier and model.",
    ["tier", "model"],
    FIRST_TOKEN_BUCKETS,
  );
  const perToken = kinds.histogram(
    "sync_time_per_output_token_seconds",
    "Synchronous requests: seconds per generated token after the first, by tier and model.",
    ["tier", "model"],
    PER_TOKEN_BUCKETS,
  );
  const gauge = (what: "running" | "waiting", help: string) =>
    kinds.liveGauge(
      `sync_lane_${what}`,
      help,
      (g) => {
        g.reset();
        for (const l of lanes()) g.set({ tier: l.tier, model: l.model }, l[what]);
      },
      ["tier", "model"],
    );
  const takebacks = kinds.counter(
    "sync_lane_takebacks_total",
    "Times a batch at risk of its deadline took back the interactive lane's share of a model's sequences.",
    ["model"],
  );
  kinds.liveGauge(
    "sync_lane_preemptions",
    "Batch lines of a local model that gave their sequence to an interactive request at their next token, since start.",
    (g) => {
      g.reset();
      for (const p of preemptions()) g.set({ model: p.model }, p.count);
    },
    ["model"],
  );
  gauge("running", "Synchronous requests running, by tier and model.");
  gauge("waiting", "Synchronous requests waiting in their lane's queue, by tier and model.");
  return {
    laneRequest(tier, model, outcome) {
      requests.inc({ tier, model, outcome });
    },
    laneLatency(tier, model, first, per) {
      firstToken.observe({ tier, model }, first);
      if (per !== undefined) perToken.observe({ tier, model }, per);
    },
    watchLanes(read) {
      lanes = read;
    },
    laneTakeback(model) {
      takebacks.inc({ model });
    },
    watchPreemptions(read) {
      preemptions = read;
    },
  };
}
