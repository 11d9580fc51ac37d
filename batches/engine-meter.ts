// Engine time and money into /metrics, by model and pool: each commit that lands adds the seconds its shard held
// a slot and, at the model's price, what that cost. A commit retried after its reply was lost can count twice
// here (the batch's own figures count it once).

import { costOf } from "../backends/price.js";
import type { ModelRegistry } from "../backends/registry.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import type { ClaimedShard, ShardCommit, WorkQueue } from "../state/ports.js";

export function meteredQueue(queue: WorkQueue, metrics: BatchMetrics | undefined, registry: ModelRegistry): WorkQueue {
  if (!metrics) return queue;
  const count = (s: ClaimedShard, c: ShardCommit) => {
    const seconds = c.seconds ?? 0;
    const price = registry.get(s.model)?.price;
    const work = { seconds, inputTokens: c.usage.promptTokens, cachedTokens: c.usage.cachedTokens, outputTokens: c.usage.completionTokens };
    const cost = price ? { currency: price.currency, amount: costOf(price, s.pool, work) } : null;
    metrics.engineWork({ model: s.model, pool: s.pool, seconds, cost });
  };
  return new Proxy(queue, {
    get(target, prop) {
      if (prop === "commit")
        return async (s: ClaimedShard, c: ShardCommit, leaseSeconds: number) => {
          const result = await target.commit(s, c, leaseSeconds);
          if (result === "committed") count(s, c);
          return result;
        };
      const v = Reflect.get(target, prop);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}
