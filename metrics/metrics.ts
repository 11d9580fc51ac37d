// The service's Prometheus metrics. One Registry per service instance (never prom-client's global
// one), so two apps in one process (tests) keep their own counts. Labels are bounded: route
// patterns, status names, pool names and endpoints, never ids.
import client from "prom-client";
import type { BackendStats } from "../openai/backend.js";
import type { Progress } from "../pipeline/types.js";
import { RateWindow } from "./rate-window.js";

const PREFIX = "obi_";
/** Engine throughput is averaged over this many seconds. */
const TOKEN_RATE_WINDOW_SECONDS = 10;
/** From a second to past OpenAI's 24h window. */
const TIME_TO_FINISH_BUCKETS = [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 48 * 3600];
const HTTP_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

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

/** The queue and pools, read at scrape time (the control plane's status satisfies it). */
export interface GaugeSource {
  queueStats(): { depth: number; max_depth: number } | Promise<{ depth: number; max_depth: number }>;
  poolStatus(): PoolGauges[] | Promise<PoolGauges[]>;
}

export interface PoolGauges {
  name: string;
  capacity: number;
  in_use: number;
}

/** What the control plane reports as batches run and end. */
export interface BatchMetrics {
  /** A batch entered a final status (completed, failed, expired, cancelled). */
  batchEnded(batch: EndedBatch): void;
  /** Returns the onProgress hook of one run; `base` is what was already on disk (a resume). */
  trackProgress(endpoint: string, base: Progress): (p: Progress) => void;
  /** One webhook delivery attempt's outcome. */
  webhookAttempt(outcome: "delivered" | "failed" | "gave_up"): void;
  /** Engine time a commit added (seconds a slot of `pool` was held), and its cost at the model's price. */
  engineWork(w: { model: string; pool: string | null; seconds: number; cost: { currency: string; amount: number } | null }): void;
}

export interface Metrics extends BatchMetrics {
  readonly registry: client.Registry;
  /** One finished HTTP request. */
  observeHttp(labels: { method: string; route: string; code: number }, seconds: number): void;
  /** Queue and pool gauges read these at scrape time. */
  watch(status: GaugeSource): void;
  /** Model and backend as an info-style gauge. */
  setBackendInfo(info: { model: string; kind: string }): void;
  /** Since start: completion tokens generated and requests finished (completed or failed), for rates over time. */
  totals(): { completionTokens: number; requests: number };
  /** Per-backend flow control (upstream backends), read at scrape time. */
  watchBackends(read: () => Array<{ model: string; stats: BackendStats }>): void;
}

export function createMetrics(opts: { now?: () => number; defaultMetrics?: boolean } = {}): Metrics {
  const registry = new client.Registry();
  if (opts.defaultMetrics !== false) client.collectDefaultMetrics({ register: registry });
  const registers = [registry];
  let status: GaugeSource | undefined;
  let backends: () => Array<{ model: string; stats: BackendStats }> = () => [];
  const tokenRate = new RateWindow(TOKEN_RATE_WINDOW_SECONDS, opts.now);
  const total = { completionTokens: 0, requests: 0 };

  const counter = (name: string, help: string, labelNames: string[]) =>
    new client.Counter({ name: `${PREFIX}${name}`, help, labelNames, registers });
  const histogram = (name: string, help: string, labelNames: string[], buckets: number[]) =>
    new client.Histogram({ name: `${PREFIX}${name}`, help, labelNames, buckets, registers });
  /** A gauge read at scrape time. */
  const liveGauge = (name: string, help: string, read: (g: client.Gauge) => void | Promise<void>, labelNames: string[] = []) =>
    new client.Gauge({
      name: `${PREFIX}${name}`,
      help,
      labelNames,
      registers,
      collect() {
        return read(this);
      },
    });
  const perPool = (read: (p: PoolGauges) => number) => async (g: client.Gauge) => {
    for (const p of (await status?.poolStatus()) ?? []) g.set({ pool: p.name }, read(p));
  };

  const webhooks = counter("webhook_deliveries_total", "Webhook delivery attempts by outcome (delivered, failed, gave_up).", ["outcome"]);
  const batches = counter("batches_total", "Batches that reached a final status.", ["status"]);
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
  const timeToFinish = histogram(
    "batch_time_to_finish_seconds",
    "From submission to the final status, per batch.",
    ["status"],
    TIME_TO_FINISH_BUCKETS,
  );
  const deadlines = counter("sla_deadlines_total", "Batches that finished before their deadline (met) or expired at it (missed).", [
    "result",
  ]);
  const httpRequests = counter("http_requests_total", "HTTP requests by route and status code.", ["method", "route", "code"]);
  const httpDuration = histogram("http_request_duration_seconds", "HTTP request latency.", ["method", "route"], HTTP_BUCKETS);
  const requests = counter("batch_requests_total", "Requests (batch lines) run, by endpoint and outcome.", ["endpoint", "outcome"]);
  const promptTokens = counter("prompt_tokens_total", "Prompt tokens processed.", ["endpoint"]);
  const completionTokens = counter("completion_tokens_total", "Completion tokens generated.", ["endpoint"]);
  const backendInfo = new client.Gauge({
    name: `${PREFIX}backend_info`,
    help: "The served model and the kind of backend serving it (value 1).",
    labelNames: ["model", "backend"],
    registers,
  });
  liveGauge(
    "engine_tokens_per_second",
    `Completion tokens generated per second, averaged over the last ${TOKEN_RATE_WINDOW_SECONDS} seconds.`,
    (g) => g.set(tokenRate.rate()),
  );
  liveGauge("queue_depth", "Batches waiting for a pool slot.", async (g) => {
    if (status) g.set((await status.queueStats()).depth);
  });
  liveGauge("queue_max_depth", "Queued batches accepted before new ones get 429.", async (g) => {
    if (status) g.set((await status.queueStats()).max_depth);
  });
  liveGauge(
    "pool_capacity",
    "Slots of each simulated GPU pool.",
    perPool((p) => p.capacity),
    ["pool"],
  );
  liveGauge(
    "pool_in_use",
    "Slots of each simulated GPU pool held by running batches.",
    perPool((p) => p.in_use),
    ["pool"],
  );

  const perBackend = (read: (s: BackendStats) => number) => (g: client.Gauge) => {
    g.reset();
    for (const b of backends()) g.set({ model: b.model }, read(b.stats));
  };
  const backendGauges: Array<[string, string, (s: BackendStats) => number]> = [
    ["backend_in_flight", "Requests sent to an upstream backend and not yet answered.", (s) => s.inFlight],
    ["backend_limit", "The adaptive limit on an upstream backend's requests in flight.", (s) => s.limit],
    ["backend_waiting", "Requests waiting for room under an upstream backend's limit.", (s) => s.waiting],
    ["backend_latency_seconds", "Smoothed latency of an upstream backend's successful requests.", (s) => s.latencyMs / 1000],
    ["backend_requests", "Requests an upstream backend has been given since start.", (s) => s.requests],
    ["backend_retries", "Attempts an upstream backend made again since start.", (s) => s.retries],
  ];
  for (const [name, help, read] of backendGauges) liveGauge(name, help, perBackend(read), ["model"]);
  const byCause = (read: (s: BackendStats) => Record<string, number>) => (g: client.Gauge) => {
    g.reset();
    for (const b of backends()) for (const [cause, n] of Object.entries(read(b.stats))) g.set({ model: b.model, cause }, n);
  };
  liveGauge(
    "backend_errors",
    "Failed attempts of an upstream backend since start, by cause (an HTTP status, timeout, connection).",
    byCause((s) => s.errors),
    ["model", "cause"],
  );
  liveGauge(
    "backend_limit_decreases",
    "Times an upstream backend's limit was cut since start, by cause (overload, latency).",
    byCause((s) => s.decreases),
    ["model", "cause"],
  );

  return {
    registry,
    watchBackends(read) {
      backends = read;
    },
    observeHttp(labels, seconds) {
      httpRequests.inc({ ...labels, code: String(labels.code) });
      httpDuration.observe({ method: labels.method, route: labels.route }, seconds);
    },
    watch(s) {
      status = s;
    },
    setBackendInfo(info) {
      backendInfo.set({ model: info.model, backend: info.kind }, 1);
    },
    batchEnded(b) {
      batches.inc({ status: b.status });
      const ended = b.completed_at ?? b.failed_at ?? b.expired_at ?? b.cancelled_at;
      if (ended !== null) timeToFinish.observe({ status: b.status }, Math.max(0, ended - b.submitted_at));
      if (b.deadline_met !== null) deadlines.inc({ result: b.deadline_met ? "met" : "missed" });
    },
    totals() {
      return { ...total };
    },
    webhookAttempt(outcome) {
      webhooks.inc({ outcome });
    },
    engineWork({ model, pool, seconds, cost }) {
      const labels = { model, pool: pool ?? "none" };
      if (seconds > 0) engineSeconds.inc(labels, seconds);
      if (cost && cost.amount > 0) spent.inc({ ...labels, currency: cost.currency }, cost.amount);
    },
    trackProgress(endpoint, base) {
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
    },
  };
}
