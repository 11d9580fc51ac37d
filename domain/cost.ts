// A batch's `cost` extension field: its engine time by pool, or its tokens, at its model's price in the models
// file. Lines answered without running (cached_lines) pay the cached input price and nothing for their output.
// Computed as a batch is read, so a price changed in the file applies to every batch shown after. A token
// price's batch discount applies to batch lines and to flex requests, never to the interactive lane. A batch over
// several models is priced model by model (`usage_by_model`), each at its own price.

import { costOf, roundMoney } from "../backends/price.js";
import type { ModelRegistry } from "../backends/registry.js";
import type { Batch, Cost, ModelUsage } from "./objects.js";
import { LANE_OF_TIER, type ServedTier } from "./sync-inference.js";

type Work = Pick<ModelUsage, "usage" | "engine_seconds">;

/** The cost of one model's work, or of synchronous requests served in `tier`; null where the model has no price. */
export function workCost(model: string | undefined, work: Work, registry: ModelRegistry, tier?: ServedTier): Cost | null {
  const price = model ? registry.get(model)?.price : undefined;
  if (!price) return null;
  const { input_tokens, output_tokens, input_tokens_details, output_tokens_details } = work.usage;
  // The output of an answer read rather than computed is reported in usage but not charged.
  const computed = Math.max(0, output_tokens - (output_tokens_details.cached_tokens ?? 0));
  const tokens = { inputTokens: input_tokens, cachedTokens: input_tokens_details.cached_tokens, outputTokens: computed };
  if (price.basis === "tokens") {
    const amount = roundMoney(costOf(price, null, { seconds: 0, ...tokens }, tier ? LANE_OF_TIER[tier] : "batch"));
    return { currency: price.currency, amount, basis: "tokens", spot: null, dedicated: null };
  }
  const spot = costOf(price, "spot", { seconds: work.engine_seconds.spot, ...tokens });
  const dedicated = costOf(price, "dedicated", { seconds: work.engine_seconds.dedicated, ...tokens });
  return {
    currency: price.currency,
    amount: roundMoney(spot + dedicated),
    basis: "pool_hours",
    spot: roundMoney(spot),
    dedicated: roundMoney(dedicated),
  };
}

/**
 * The sum of several models' costs when each has one and they share a currency and a basis; else null (a model
 * without a price makes the whole unknown, as for a batch of one model; two currencies have no one figure), while
 * each model's own is still shown.
 */
function sumCosts(costs: ReadonlyArray<Cost | null>): Cost | null {
  if (costs.some((c) => c === null)) return null;
  const priced = costs as Cost[];
  if (priced.length === 0 || priced.some((c) => c.currency !== priced[0].currency || c.basis !== priced[0].basis)) return null;
  const add = (f: (c: Cost) => number | null) => roundMoney(priced.reduce((n, c) => n + (f(c) ?? 0), 0));
  const byPool = priced[0].basis === "pool_hours";
  return {
    currency: priced[0].currency,
    amount: add((c) => c.amount),
    basis: priced[0].basis,
    spot: byPool ? add((c) => c.spot) : null,
    dedicated: byPool ? add((c) => c.dedicated) : null,
  };
}

/** The cost of a batch's work: its model's, or the sum of its models'. */
export function batchCost(
  batch: Pick<Batch, "model" | "usage" | "engine_seconds" | "usage_by_model">,
  registry: ModelRegistry,
): Cost | null {
  if (!batch.usage_by_model) return workCost(batch.model, batch, registry);
  return sumCosts(Object.entries(batch.usage_by_model).map(([model, work]) => workCost(model, work, registry)));
}

/** The batch as clients read it: with its cost, and each model's where it has several (each priced once). */
export function priced(batch: Batch, registry: ModelRegistry): Batch {
  if (!batch.usage_by_model) return { ...batch, cost: workCost(batch.model, batch, registry) };
  const byModel = Object.fromEntries(
    Object.entries(batch.usage_by_model).map(([model, work]) => [model, { ...work, cost: workCost(model, work, registry) }]),
  );
  return { ...batch, cost: sumCosts(Object.values(byModel).map((m) => m.cost)), usage_by_model: byModel };
}
