// The service's Prometheus metrics. One Registry per service instance (never prom-client's global
// one), so two apps in one process (tests) keep their own counts. Labels are bounded: route
// patterns, status names, pool names and endpoints, never ids. Each part has its own module: the cluster's figures,
// the backends', HTTP, batches, the synchronous lanes and the result cache.
import client from "prom-client";
import { type BackendMetrics, createBackendMetrics } from "./backend-metrics.js";
import { type BatchMetrics, type BatchTotals, createBatchMetrics } from "./batch-metrics.js";
import { type CacheMetrics, createCacheMetrics } from "./cache-metrics.js";
import { type ClusterMetrics, createClusterMetrics } from "./cluster-metrics.js";
import { createHttpMetrics, type HttpMetrics } from "./http-metrics.js";
import { metricKinds } from "./kinds.js";
import { createLaneMetrics, type LaneMetrics } from "./lane-metrics.js";

export type { BatchMetrics, EndedBatch } from "./batch-metrics.js";
export type { GaugeSource, PoolGauges } from "./cluster-metrics.js";

export interface Metrics extends BatchMetrics, BatchTotals, LaneMetrics, ClusterMetrics, BackendMetrics, HttpMetrics, CacheMetrics {
  readonly registry: client.Registry;
  /**
   * Each key's series (its tokens, what it has enqueued), labelled by its id: who the tenants are and what each
   * used, so /metrics serves them to an admin key's scrape only (api/routes/metrics.ts).
   */
  readonly tenants: client.Registry;
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
  const tenants = new client.Registry();
  if (opts.labels) for (const r of [registry, tenants]) r.setDefaultLabels(opts.labels);
  if (opts.defaultMetrics !== false) client.collectDefaultMetrics({ register: registry });
  const kinds = metricKinds([registry]);
  return {
    registry,
    tenants,
    ...createClusterMetrics(kinds, metricKinds([tenants])),
    ...createBatchMetrics(kinds, opts.now),
    ...createHttpMetrics(kinds),
    ...createBackendMetrics(kinds),
    ...createLaneMetrics(kinds),
    ...createCacheMetrics(kinds),
  };
}
