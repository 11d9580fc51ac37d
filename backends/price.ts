// What running a model costs, as the models file prices it: per hour of a pool's slot (spot cheaper than
// dedicated, the simulated pools' trade-off) or per million tokens (what an upstream bills). One arithmetic
// for a batch's `cost`, /metrics and the runner's summary.
import { z } from "zod";
import { strictObject } from "../config/known-keys.js";
import type { Lane } from "../openai/backend.js";

const money = z.number().min(0);

export const PriceSchema = strictObject({
  currency: z
    .string()
    .regex(/^[A-Z]{3}$/, "must be a three-letter currency code such as USD")
    .default("USD"),
  spot_per_hour: money.optional(),
  dedicated_per_hour: money.optional(),
  input_per_million: money.optional(),
  cached_input_per_million: money.optional(),
  output_per_million: money.optional(),
  batch_discount: z.number().min(0).max(1).optional(),
}).superRefine((p, ctx) => {
  const hourly = p.spot_per_hour !== undefined || p.dedicated_per_hour !== undefined;
  const tokens = p.input_per_million !== undefined || p.output_per_million !== undefined || p.cached_input_per_million !== undefined;
  if (hourly === tokens)
    ctx.addIssue({
      code: "custom",
      message: "give either spot_per_hour and dedicated_per_hour, or input_per_million and output_per_million",
    });
  else if (hourly && (p.spot_per_hour === undefined || p.dedicated_per_hour === undefined))
    ctx.addIssue({ code: "custom", message: "a price per pool hour needs both spot_per_hour and dedicated_per_hour" });
  else if (tokens && (p.input_per_million === undefined || p.output_per_million === undefined))
    ctx.addIssue({ code: "custom", message: "a price per million tokens needs both input_per_million and output_per_million" });
  else if (hourly && p.batch_discount !== undefined)
    ctx.addIssue({
      code: "custom",
      message: "batch_discount applies to a price per million tokens; a pool-hour price discounts batches by its spot rate",
    });
});

export type Price =
  | { currency: string; basis: "pool_hours"; spotPerHour: number; dedicatedPerHour: number }
  | {
      currency: string;
      basis: "tokens";
      inputPerMillion: number;
      cachedInputPerMillion: number;
      outputPerMillion: number;
      /** The share taken off for batch lines and flex requests (0 to 1); the interactive lane pays the whole. */
      batchDiscount: number;
    };

export function priceFrom(p: z.output<typeof PriceSchema>): Price {
  if (p.spot_per_hour !== undefined)
    return { currency: p.currency, basis: "pool_hours", spotPerHour: p.spot_per_hour, dedicatedPerHour: p.dedicated_per_hour! };
  return {
    currency: p.currency,
    basis: "tokens",
    inputPerMillion: p.input_per_million!,
    // A cached prompt token is billed as an input token unless the file says less.
    cachedInputPerMillion: p.cached_input_per_million ?? p.input_per_million!,
    outputPerMillion: p.output_per_million!,
    batchDiscount: p.batch_discount ?? 0,
  };
}

/** Work done in one pool, or by a whole batch: engine seconds and tokens. */
export interface Work {
  seconds: number;
  inputTokens: number;
  /** Of the input tokens, those read from a cached prefix. */
  cachedTokens: number;
  outputTokens: number;
}

/**
 * What `work` in `pool` costs; a pool-hour price needs the pool (null: no slot was held, so nothing is owed). Batch
 * work (batch lines, flex requests) takes a token price's batch discount; interactive work pays the whole.
 */
export function costOf(price: Price, pool: "spot" | "dedicated" | null, work: Work, lane: Lane = "batch"): number {
  if (price.basis === "pool_hours") {
    if (pool === null) return 0;
    return (work.seconds / 3600) * (pool === "spot" ? price.spotPerHour : price.dedicatedPerHour);
  }
  const fresh = Math.max(0, work.inputTokens - work.cachedTokens);
  const whole =
    (fresh * price.inputPerMillion + work.cachedTokens * price.cachedInputPerMillion + work.outputTokens * price.outputPerMillion) / 1e6;
  return lane === "batch" ? whole * (1 - price.batchDiscount) : whole;
}

/** Money is shown to a millionth of the currency unit: batches of small requests cost fractions of a cent. */
export const roundMoney = (amount: number) => Math.round(amount * 1e6) / 1e6;
