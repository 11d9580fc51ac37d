// The service's Prometheus metrics. One Registry per service instance (never prom-client's global
// one), so two apps in one process (tests) keep their own counts. Labels are bounded: route
// patterns, status names, pool names and endpoints, never ids.
import client from "prom-client";
import { keyIdOfOwner } from "../config/keys.js";
import type { BackendStats } from "../openai/backend.js";
import type { Progress } from "../pipeline/types.js";
import { createLaneMetrics, type LaneMetrics } from "./lane-metrics.js";
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
  /**
   * Whether this process exports the cluster's figures (queue, pools): only the maintenance's leader does, so
   * summing over processes counts them once. Absent: always (one process).
   */
  leader?(): boolean;
  /** The cluster's running totals kept in the state (batches:<status>, requests:<outcome>, deadlines:<result>). */
  totals?(): Promise<Record<string, number>>;
  /** What a key is called in labels: its id from the keys file, never its secret ("-": no key). */
  keyName?(owner: string): string;
  /** Each key's enqueued tokens by model now (the keys' ids). */
  enqueued?(): Promise<Array<{ key: string; model: string; tokens: number }>>;
}

export interface PoolGauges {
  name: string;
  capacity: number;
  in_use: number;
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

export interface Metrics extends BatchMetrics, LaneMetrics {
  readonly registry: client.Registry;
  /** One finished HTTP request. */
  observeHttp(labels: { method: string; route: string; code: number }, seconds: number): void;
  /** Queue and pool gauges read these at scrape time. */
  watch(status: GaugeSource): void;
  /** Model and backend as an info-style gauge. */
  setBackendInfo(info: { model: string; kind: string; settings?: Readonly<Record<string, unknown>> }): void;
  /** Since start: completion tokens generated and requests finished (completed or failed), for rates over time. */
  totals(): { completionTokens: number; requests: number };
  /** Per-backend flow control (upstream backends), read at scrape time. */
  watchBackends(read: () => Array<{ model: string; stats: BackendStats }>): void;
}

export function createMetrics(
  opts: {
    now?: () => number;
    /** Node's own process metrics (CPU, memory, event loop). */
    defaultMetrics?: boolean;
    /** Labels every sample (the process, in the distributed mode). */
    labels?: Record<string, string>;
  } = {},
): Metrics {
  const registry = new client.Registry();
  if (opts.labels) registry.setDefaultLabels(opts.labels);
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
  /** The cluster's figures, from the leader only (none elsewhere: a sum over processes counts them once). */
  const cluster = () => (status && status.leader?.() !== false ? status : undefined);
  const perPool = (read: (p: PoolGauges) => number) => async (g: client.Gauge) => {
    g.reset();
    for (const p of (await cluster()?.poolStatus()) ?? []) g.set({ pool: p.name }, read(p));
  };

  const webhooks = counter("webhook_deliveries_total", "Webhook delivery attempts by outcome (delivered, failed, gave_up).", ["outcome"]);
  /**
   * A counter of the cluster's totals, read from the state at scrape time by the maintenance's leader (elsewhere it
   * has no sample): a process that exits or loses the lease loses no count, and a sum over processes counts once.
   */
  const fromTotals = (
    name: string,
    help: string,
    labelNames: string[],
    labelsOf: (total: string, source: GaugeSource) => Record<string, string> | undefined,
  ) => {
    const seen = new Map<string, number>();
    return new client.Counter({
      name: `${PREFIX}${name}`,
      help,
      labelNames,
      registers,
      async collect() {
        const source = cluster();
        if (!source?.totals) {
          this.reset();
          seen.clear();
          return;
        }
        for (const [total, value] of Object.entries(await source.totals())) {
          const labels = labelsOf(total, source);
          if (!labels) continue;
          const added = value - (seen.get(total) ?? 0);
          if (added > 0) this.inc(labels, added);
          seen.set(total, value);
        }
      },
    });
  };
  /** The totals named `prefix` and a value, that value as `label`. */
  const byPrefix = (label: string, prefix: string) => (total: string) =>
    total.startsWith(prefix) ? { [label]: total.slice(prefix.length) } : undefined;
  fromTotals(
    "key_tokens_total",
    "Tokens of ended batches by key (its id, never its secret), model and kind (input, cached, output); the leader's count.",
    ["key", "model", "kind"],
    (total, source) => {
      const m = /^key_tokens:([^|]*)\|(.*)\|(input|cached|output)$/.exec(total);
      if (!m) return undefined;
      return { key: m[1] === "-" ? "-" : (source.keyName?.(m[1]) ?? keyIdOfOwner(m[1])), model: m[2], kind: m[3] };
    },
  );
  liveGauge(
    "key_enqueued_tokens",
    "Estimated tokens of each key's open batches, by model: what its enqueued-token limits count (the leader's figure).",
    async (g) => {
      g.reset();
      for (const e of (await cluster()?.enqueued?.()) ?? []) g.set({ key: e.key, model: e.model }, e.tokens);
    },
    ["key", "model"],
  );
  fromTotals(
    "batches_total",
    "Batches that reached a final status (the cluster's, from the leader).",
    ["status"],
    byPrefix("status", "batches:"),
  );
  fromTotals(
    "requests_total",
    "Requests of ended batches, by outcome (the cluster's, from the leader).",
    ["outcome"],
    byPrefix("outcome", "requests:"),
  );
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
  const timeToFinish = histogram(
    "batch_time_to_finish_seconds",
    "From submission to the final status, per batch.",
    ["status"],
    TIME_TO_FINISH_BUCKETS,
  );
  fromTotals(
    "sla_deadlines_total",
    "Batches that finished before their deadline (met) or expired at it (missed); the cluster's, from the leader.",
    ["result"],
    byPrefix("result", "deadlines:"),
  );
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
  const engineBuild = new client.Gauge({
    name: `${PREFIX}engine_build_info`,
    help: 'The node-llama-cpp build the local engine runs (value 1): "prebuilt" binaries or the "patched" build of npm run build:engine.',
    labelNames: ["model", "build"],
    registers,
  });
  liveGauge(
    "engine_tokens_per_second",
    `Completion tokens generated per second, averaged over the last ${TOKEN_RATE_WINDOW_SECONDS} seconds.`,
    (g) => g.set(tokenRate.rate()),
  );
  const queue = (read: (q: { depth: number; max_depth: number }) => number) => async (g: client.Gauge) => {
    g.reset();
    const source = cluster();
    if (source) g.set({ scope: "cluster" }, read(await source.queueStats()));
  };
  // Labelled (scope="cluster"), as an unlabelled gauge always has a sample: a process that is not the leader has none.
  liveGauge(
    "queue_depth",
    "Batches waiting for a pool slot (the maintenance's leader only).",
    queue((q) => q.depth),
    ["scope"],
  );
  liveGauge(
    "queue_max_depth",
    "Queued batches accepted before new ones get 429 (the leader only).",
    queue((q) => q.max_depth),
    ["scope"],
  );
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
    ...createLaneMetrics(PREFIX, registers),
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
      const build = info.settings?.engineBuild;
      if (typeof build === "string") engineBuild.set({ model: info.model, build }, 1);
    },
    batchEnded(b) {
      // Counted where the batch ended (the totals above come from the state).
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
