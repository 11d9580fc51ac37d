// A batch's cost at its models' prices: one model's at its own, a batch over several the sum of each model's share
// at that model's price, and no one figure where the shares' prices differ in currency or basis.
import { describe, expect, it } from "vitest";
import { ModelRegistry } from "../../backends/registry.js";
import { batchCost, priced } from "../../domain/cost.js";
import type { Batch, ModelUsage } from "../../domain/objects.js";

const tokens = { inputPerMillion: 1, cachedInputPerMillion: 0.5, outputPerMillion: 2, batchDiscount: 0 };
const model = (name: string, price?: object) => ({
  name,
  aliases: [],
  backend: { kind: "local", path: `/${name}.gguf` },
  generated: false,
  price,
});
const registry = new ModelRegistry(
  [
    model("base", { currency: "USD", basis: "tokens", ...tokens }),
    model("sent-v2", { currency: "USD", basis: "tokens", ...tokens, outputPerMillion: 20 }),
    model("eur", { currency: "EUR", basis: "tokens", ...tokens }),
    model("free"),
  ] as never,
  "base",
);

const share = (input: number, output: number, cachedOutput = 0): ModelUsage => ({
  request_counts: { completed: 1, failed: 0, total: 1 },
  cached_lines: 0,
  usage: {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0, cached_tokens: cachedOutput },
    total_tokens: input + output,
  },
  engine_seconds: { spot: 0, dedicated: 0 },
});
const batch = (byModel: Record<string, ModelUsage>): Batch =>
  ({ model: Object.keys(byModel)[0], ...share(0, 0), usage_by_model: byModel }) as unknown as Batch;

describe("a batch's cost over several models", () => {
  it("prices each model's share at its own price and sums them", () => {
    // base: 1M input at 1 + 1M output at 2; sent-v2: 1M output at 20 (a cached answer's output is not charged).
    const b = batch({ base: share(1e6, 1e6), "sent-v2": share(0, 1.5e6, 0.5e6) });
    expect(batchCost(b, registry)).toEqual({ currency: "USD", amount: 23, basis: "tokens", spot: null, dedicated: null });
    const shown = priced(b, registry);
    expect(Object.fromEntries(Object.entries(shown.usage_by_model!).map(([m, u]) => [m, u.cost?.amount]))).toEqual({
      base: 3,
      "sent-v2": 20,
    });
    expect(shown.cost?.amount).toBe(23);
  });

  it("has no one figure where the shares' currencies differ, or where a model has no price (each model's own shown)", () => {
    expect(batchCost(batch({ base: share(1e6, 0), eur: share(1e6, 0) }), registry)).toBeNull();
    expect(batchCost(batch({ free: share(1e6, 0), other: share(1, 1) }), registry)).toBeNull();
    const partly = priced(batch({ base: share(1e6, 0), free: share(1e6, 0) }), registry);
    expect([partly.cost, partly.usage_by_model!.base.cost?.amount, partly.usage_by_model!.free.cost]).toEqual([null, 1, null]);
    // Without shares, the batch's own usage at its model's price.
    expect(batchCost({ model: "base", ...share(2e6, 0) }, registry)?.amount).toBe(2);
  });
});
