// A batch's `cost` extension field: its engine time by pool, or its tokens, at its model's price in the models
// file. Computed as a batch is read, so a price changed in the file applies to every batch shown after. A token
// price's batch discount applies to batch lines and to flex requests, never to the interactive lane.

import { costOf, roundMoney } from "../backends/price.js";
import type { ModelRegistry } from "../backends/registry.js";
import type { Batch, Cost } from "./objects.js";
import { LANE_OF_TIER, type ServedTier } from "./sync-inference.js";

/** The cost of a batch's work, or of synchronous requests served in `tier`. */
export function batchCost(
  batch: Pick<Batch, "model" | "usage" | "engine_seconds">,
  registry: ModelRegistry,
  tier?: ServedTier,
): Cost | null {
  const price = batch.model ? registry.get(batch.model)?.price : undefined;
  if (!price) return null;
  const { input_tokens, output_tokens, input_tokens_details } = batch.usage;
  const tokens = { inputTokens: input_tokens, cachedTokens: input_tokens_details.cached_tokens, outputTokens: output_tokens };
  if (price.basis === "tokens") {
    const amount = roundMoney(costOf(price, null, { seconds: 0, ...tokens }, tier ? LANE_OF_TIER[tier] : "batch"));
    return { currency: price.currency, amount, basis: "tokens", spot: null, dedicated: null };
  }
  const spot = costOf(price, "spot", { seconds: batch.engine_seconds.spot, ...tokens });
  const dedicated = costOf(price, "dedicated", { seconds: batch.engine_seconds.dedicated, ...tokens });
  return {
    currency: price.currency,
    amount: roundMoney(spot + dedicated),
    basis: "pool_hours",
    spot: roundMoney(spot),
    dedicated: roundMoney(dedicated),
  };
}

/** The batch as clients read it: with its cost. */
export const priced = (batch: Batch, registry: ModelRegistry): Batch => ({ ...batch, cost: batchCost(batch, registry) });
