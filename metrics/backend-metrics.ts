// The backends: the served model and its kind, the engine's build, and each upstream backend's flow control (its
// requests in flight, adaptive limit, waiting, latency, retries and errors), read at scrape time.
import type client from "prom-client";
import type { BackendStats } from "../openai/backend.js";
import type { MetricKinds } from "./kinds.js";

export interface BackendMetrics {
  /** Model and backend as an info-style gauge. */
  setBackendInfo(info: { model: string; kind: string; settings?: Readonly<Record<string, unknown>> }): void;
  /** Per-backend flow control (upstream backends), read at scrape time. */
  watchBackends(read: () => Array<{ model: string; stats: BackendStats }>): void;
}

export function createBackendMetrics(kinds: MetricKinds): BackendMetrics {
  let backends: () => Array<{ model: string; stats: BackendStats }> = () => [];
  const backendInfo = kinds.gauge("backend_info", "The served model and the kind of backend serving it (value 1).", ["model", "backend"]);
  const engineBuild = kinds.gauge(
    "engine_build_info",
    'The node-llama-cpp build the local engine runs (value 1): "prebuilt" binaries or the "patched" build of npm run build:engine.',
    ["model", "build"],
  );
  const perBackend = (read: (s: BackendStats) => number) => (g: client.Gauge) => {
    g.reset();
    for (const b of backends()) g.set({ model: b.model }, read(b.stats));
  };
  const gauges: Array<[string, string, (s: BackendStats) => number]> = [
    ["backend_in_flight", "Requests sent to an upstream backend and not yet answered.", (s) => s.inFlight],
    ["backend_limit", "The adaptive limit on an upstream backend's requests in flight.", (s) => s.limit],
    ["backend_waiting", "Requests waiting for room under an upstream backend's limit.", (s) => s.waiting],
    ["backend_latency_seconds", "Smoothed latency of an upstream backend's successful requests.", (s) => s.latencyMs / 1000],
    ["backend_requests", "Requests an upstream backend has been given since start.", (s) => s.requests],
    ["backend_retries", "Attempts an upstream backend made again since start.", (s) => s.retries],
  ];
  for (const [name, help, read] of gauges) kinds.liveGauge(name, help, perBackend(read), ["model"]);
  const byCause = (read: (s: BackendStats) => Record<string, number>) => (g: client.Gauge) => {
    g.reset();
    for (const b of backends()) for (const [cause, n] of Object.entries(read(b.stats))) g.set({ model: b.model, cause }, n);
  };
  kinds.liveGauge(
    "backend_errors",
    "Failed attempts of an upstream backend since start, by cause (an HTTP status, timeout, connection).",
    byCause((s) => s.errors),
    ["model", "cause"],
  );
  kinds.liveGauge(
    "backend_limit_decreases",
    "Times an upstream backend's limit was cut since start, by cause (overload, latency).",
    byCause((s) => s.decreases),
    ["model", "cause"],
  );
  return {
    watchBackends(read) {
      backends = read;
    },
    setBackendInfo(info) {
      backendInfo.set({ model: info.model, backend: info.kind }, 1);
      const build = info.settings?.engineBuild;
      if (typeof build === "string") engineBuild.set({ model: info.model, build }, 1);
    },
  };
}
