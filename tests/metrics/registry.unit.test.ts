// The registry composed from its parts: every part's metrics in the one registry, each named once with the prefix,
// and the cluster's figures exported by the leader only.
import { describe, expect, it } from "vitest";
import { createMetrics } from "../../metrics/metrics.js";
import type { Progress } from "../../pipeline/types.js";

const progress = (completed: number, failed: number, completionTokens: number): Progress => ({
  completed,
  failed,
  usage: { promptTokens: completed * 3, completionTokens, cachedTokens: 0 },
});

describe("the metrics registry", () => {
  it("holds each part's metrics once, all prefixed", async () => {
    const m = createMetrics({ defaultMetrics: false });
    const names = (await m.registry.getMetricsAsJSON()).map((x) => x.name);
    expect(new Set(names).size).toBe(names.length);
    expect(names.every((n) => n.startsWith("obi_"))).toBe(true);
    for (const part of [
      "obi_queue_depth",
      "obi_batch_requests_total",
      "obi_http_requests_total",
      "obi_backend_info",
      "obi_sync_requests_total",
    ])
      expect(names).toContain(part);
  });

  it("counts a run's progress from what was already done, and keeps the totals", async () => {
    const m = createMetrics({ defaultMetrics: false });
    const hook = m.trackProgress("/v1/completions", progress(2, 0, 10));
    hook(progress(5, 1, 40));
    m.observeHttp({ method: "GET", route: "/v1/batches", code: 200 }, 0.01);
    const text = await m.registry.metrics();
    expect(text).toMatch(/obi_batch_requests_total\{endpoint="\/v1\/completions",outcome="completed"\} 3/);
    expect(text).toMatch(/obi_batch_requests_total\{endpoint="\/v1\/completions",outcome="failed"\} 1/);
    expect(text).toMatch(/obi_http_requests_total\{method="GET",route="\/v1\/batches",code="200"\} 1/);
    expect(m.totals()).toEqual({ completionTokens: 30, requests: 4 });
  });

  it("exports the queue and pools from the leader only", async () => {
    const m = createMetrics({ defaultMetrics: false });
    let leader = true;
    m.watch({
      queueStats: () => ({ depth: 3, max_depth: 100 }),
      poolStatus: () => [{ name: "spot", capacity: 4, in_use: 1 }],
      leader: () => leader,
    });
    expect(await m.registry.metrics()).toMatch(/obi_queue_depth\{scope="cluster"\} 3/);
    expect(await m.registry.metrics()).toMatch(/obi_pool_in_use\{pool="spot"\} 1/);
    leader = false;
    const text = await m.registry.metrics();
    expect(text).not.toMatch(/obi_queue_depth\{/);
    expect(text).not.toMatch(/obi_pool_in_use\{/);
  });
});
