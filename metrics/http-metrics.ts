// HTTP requests by route pattern and status code, and their latency.
import type { MetricKinds } from "./kinds.js";

const HTTP_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface HttpMetrics {
  /** One finished HTTP request. */
  observeHttp(labels: { method: string; route: string; code: number }, seconds: number): void;
}

export function createHttpMetrics(kinds: MetricKinds): HttpMetrics {
  const requests = kinds.counter("http_requests_total", "HTTP requests by route and status code.", ["method", "route", "code"]);
  const duration = kinds.histogram("http_request_duration_seconds", "HTTP request latency.", ["method", "route"], HTTP_BUCKETS);
  return {
    observeHttp(labels, seconds) {
      requests.inc({ ...labels, code: String(labels.code) });
      duration.observe({ method: labels.method, route: labels.route }, seconds);
    },
  };
}
