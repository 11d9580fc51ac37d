// The synchronous lanes' metrics: requests by tier and outcome (a 429 is "refused"), time to first token and time
// per output token by tier and model, and each lane's running and waiting requests read at scrape time.
import client from "prom-client";

/** From 10 ms to a minute: an interactive first token should come in well under a second; a flex one may wait. */
const FIRST_TOKEN_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const PER_TOKEN_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

export type LaneOutcome = "completed" | "refused" | "failed" | "disconnected";

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

export function createLaneMetrics(prefix: string, registers: client.Registry[]): LaneMetrics {
  let lanes: () => LaneState[] = () => [];
  let preemptions: () => Array<{ model: string; count: number }> = () => [];
  const requests = new client.Counter({
    name: `${prefix}sync_requests_total`,
    help: "Synchronous requests by tier (default, flex), model and outcome (completed, refused with a 429, failed, disconnected).",
    labelNames: ["tier", "model", "outcome"],
    registers,
  });
  const firstToken = new client.Histogram({
    name: `${prefix}sync_time_to_first_token_seconds`,
    help: "Synchronous requests: seconds from arrival to the first generated token, by tier and model.",
    labelNames: ["tier", "model"],
    buckets: FIRST_TOKEN_BUCKETS,
    registers,
  });
  const perToken = new client.Histogram({
    name: `${prefix}sync_time_per_output_token_seconds`,
    help: "Synchronous requests: seconds per generated token after the first, by tier and model.",
    labelNames: ["tier", "model"],
    buckets: PER_TOKEN_BUCKETS,
    registers,
  });
  const gauge = (what: "running" | "waiting", help: string) =>
    new client.Gauge({
      name: `${prefix}sync_lane_${what}`,
      help,
      labelNames: ["tier", "model"],
      registers,
      collect() {
        this.reset();
        for (const l of lanes()) this.set({ tier: l.tier, model: l.model }, l[what]);
      },
    });
  const takebacks = new client.Counter({
    name: `${prefix}sync_lane_takebacks_total`,
    help: "Times a batch at risk of its deadline took back the interactive lane's share of a model's sequences.",
    labelNames: ["model"],
    registers,
  });
  new client.Gauge({
    name: `${prefix}sync_lane_preemptions`,
    help: "Batch lines of a local model that gave their sequence to an interactive request at their next token, since start.",
    labelNames: ["model"],
    registers,
    collect() {
      this.reset();
      for (const p of preemptions()) this.set({ model: p.model }, p.count);
    },
  });
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
