// The usage and costs pages against OpenAI's documented fields (no official SDK types them), and their arithmetic:
// buckets, groups, filters and pages from usage records.
import { describe, expect, it } from "vitest";
import { ModelRegistry } from "../../backends/registry.js";
import { parseUsageQuery, type UsageRecord, usagePage } from "../../domain/usage.js";

const registry = new ModelRegistry(
  [
    {
      name: "m1",
      aliases: [],
      backend: { kind: "local", path: "/m1.gguf" },
      generated: false,
      price: { currency: "USD", basis: "tokens", inputPerMillion: 1, cachedInputPerMillion: 0.5, outputPerMillion: 2, batchDiscount: 0 },
    },
    { name: "m2", aliases: ["m2-alias"], backend: { kind: "local", path: "/m2.gguf" }, generated: false },
    {
      name: "m3",
      aliases: [],
      backend: { kind: "local", path: "/m3.gguf" },
      generated: false,
      price: { currency: "EUR", basis: "tokens", inputPerMillion: 1, cachedInputPerMillion: 0.5, outputPerMillion: 2, batchDiscount: 0 },
    },
  ] as never,
  "m1",
);
const T = 1_764_000_000;
const rec = (o: Partial<UsageRecord> & { input: number; output: number }): UsageRecord => ({
  batchId: `batch_${Math.random()}`,
  owner: "o1",
  model: "m1",
  endpoint: "/v1/chat/completions",
  endedAt: T + 10,
  requests: 2,
  usage: {
    input_tokens: o.input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: o.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: o.input + o.output,
  },
  engine_seconds: { spot: 0, dedicated: 0 },
  ...o,
});
const idOf = (o: string | null) => (o === "o1" ? "team-a" : o === "o2" ? "team-b" : null);
const records = [
  rec({ input: 1000, output: 100 }),
  rec({ input: 2000, output: 200, owner: "o2", model: "m2", endedAt: T + 3700 }),
  rec({ input: 500, output: 0, endpoint: "/v1/embeddings", requests: 5 }),
];
const page = (kind: "completions" | "embeddings" | "costs", q: Record<string, unknown>) =>
  usagePage(records, parseUsageQuery(kind, q, T + 7199), idOf, registry);

describe("usage pages", () => {
  it("answers in OpenAI's documented fields: page, bucket and each kind of result", () => {
    const p = page("completions", { start_time: String(T), bucket_width: "1h", group_by: ["api_key_id", "model"] });
    expect(Object.keys(p)).toEqual(["object", "data", "has_more", "next_page"]);
    expect(Object.keys(p.data[0])).toEqual(["object", "start_time", "end_time", "results"]);
    expect(Object.keys(p.data[0].results[0]).sort()).toEqual(
      [
        "object",
        "input_tokens",
        "output_tokens",
        "input_cached_tokens",
        "input_audio_tokens",
        "output_audio_tokens",
        "num_model_requests",
        "project_id",
        "user_id",
        "api_key_id",
        "model",
        "batch",
        "service_tier",
      ].sort(),
    );
    const e = page("embeddings", { start_time: String(T) }).data[0].results[0];
    expect(Object.keys(e).sort()).toEqual(
      ["object", "input_tokens", "num_model_requests", "project_id", "user_id", "api_key_id", "model"].sort(),
    );
    expect(e).toMatchObject({ object: "organization.usage.embeddings.result", input_tokens: 500, num_model_requests: 5 });
    const c = page("costs", { start_time: String(T), group_by: "line_item" }).data[0].results;
    expect(Object.keys(c[0]).sort()).toEqual(["object", "amount", "line_item", "project_id", "api_key_id"].sort());
    // m1: 1,500 input tokens at 1 per million and 100 output at 2; m2 has no price, so no cost result.
    expect(c).toEqual([
      {
        object: "organization.costs.result",
        amount: { value: 0.0017, currency: "usd" },
        line_item: "m1",
        project_id: null,
        api_key_id: null,
      },
    ]);
  });

  it("buckets by where each batch ended, groups and filters", () => {
    const p = page("completions", { start_time: String(T), bucket_width: "1h", group_by: "api_key_id" });
    expect(p.data.map((b) => [b.start_time, b.end_time])).toEqual([
      [T, T + 3600],
      [T + 3600, T + 7200],
    ]);
    expect(p.data[0].results).toEqual([
      expect.objectContaining({ api_key_id: "team-a", input_tokens: 1000, output_tokens: 100, model: null }),
    ]);
    expect(p.data[1].results).toEqual([expect.objectContaining({ api_key_id: "team-b", input_tokens: 2000 })]);
    const one = page("completions", { start_time: String(T), bucket_width: "1h", api_key_ids: "team-b", models: "m2" });
    expect(one.data.flatMap((b) => b.results).map((r) => r.input_tokens)).toEqual([2000]);
    // A model asked for by its alias.
    const aliased = page("completions", { start_time: String(T), bucket_width: "1h", models: "m2-alias" });
    expect(aliased.data.flatMap((b) => b.results).map((r) => r.input_tokens)).toEqual([2000]);
    expect(page("completions", { start_time: String(T), batch: "false" }).data[0].results).toEqual([]);
    expect(page("completions", { start_time: String(T), group_by: "batch" }).data[0].results[0]).toMatchObject({ batch: true });
  });

  it("counts a batch over several models as each model's share, in usage and in costs", () => {
    const share = (model: string, requests: number, input: number, output: number) => {
      const { usage, engine_seconds } = rec({ input, output });
      return { model, requests, usage, engine_seconds };
    };
    const mixed = rec({ input: 3000, output: 300, requests: 3, byModel: [share("m1", 1, 1000, 100), share("m2", 2, 2000, 200)] });
    const q = (kind: "completions" | "costs", o: Record<string, unknown>) =>
      usagePage([mixed], parseUsageQuery(kind, { start_time: String(T), ...o }, T + 60), idOf, registry).data[0].results;
    expect(q("completions", { group_by: "model" }).map((r) => [r.model, r.num_model_requests, r.input_tokens, r.output_tokens])).toEqual([
      ["m1", 1, 1000, 100],
      ["m2", 2, 2000, 200],
    ]);
    expect(q("completions", { models: "m2" }).map((r) => r.input_tokens)).toEqual([2000]);
    // Ungrouped, the shares add up to the batch's own figures.
    expect(q("completions", {})[0]).toMatchObject({ input_tokens: 3000, output_tokens: 300, num_model_requests: 3 });
    // Each share at its own model's price: m1's 1,000 input and 100 output tokens; m2 has none.
    expect(q("costs", { group_by: "line_item" }).map((r) => [r.line_item, (r.amount as { value: number }).value])).toEqual([
      ["m1", 0.0012],
    ]);
  });

  it("never adds two currencies: ungrouped costs are a result per currency", () => {
    const both = [rec({ input: 1e6, output: 0 }), rec({ input: 2e6, output: 0, model: "m3" })];
    const costs = usagePage(both, parseUsageQuery("costs", { start_time: String(T) }, T + 60), idOf, registry).data[0].results;
    expect(costs.map((r) => r.amount)).toEqual(
      expect.arrayContaining([
        { value: 1, currency: "usd" },
        { value: 2, currency: "eur" },
      ]),
    );
    expect(costs).toHaveLength(2);
  });

  it("pages through buckets with limit and page", () => {
    const first = page("completions", { start_time: String(T), bucket_width: "1m", limit: "30" });
    expect(first.data).toHaveLength(30);
    expect(first.has_more).toBe(true);
    const second = page("completions", { start_time: String(T), bucket_width: "1m", limit: "100", page: first.next_page });
    expect(second.data[0].start_time).toBe(T + 30 * 60);
    expect(second.data).toHaveLength(90);
    expect(second).toMatchObject({ has_more: false, next_page: null });
  });

  it("counts synchronous requests apart (batch: false, their tier), priced at the full price or, for flex, the batch price", () => {
    const discounted = new ModelRegistry(
      [
        {
          name: "m1",
          aliases: [],
          backend: { kind: "local", path: "/m1.gguf" },
          generated: false,
          price: {
            currency: "USD",
            basis: "tokens",
            inputPerMillion: 1,
            cachedInputPerMillion: 1,
            outputPerMillion: 1,
            batchDiscount: 0.5,
          },
        },
      ] as never,
      "m1",
    );
    const mixed = [
      rec({ input: 1_000_000, output: 0 }),
      rec({ input: 1_000_000, output: 0, batch: false, serviceTier: "default", requests: 3 }),
      rec({ input: 1_000_000, output: 0, batch: false, serviceTier: "flex", requests: 4 }),
    ];
    const q = (kind: "completions" | "costs", o: Record<string, unknown>) =>
      usagePage(mixed, parseUsageQuery(kind, { start_time: String(T), ...o }, T + 60), idOf, discounted).data[0].results;
    expect(q("completions", { group_by: "batch,service_tier" })).toEqual([
      expect.objectContaining({ batch: false, service_tier: "default", num_model_requests: 3 }),
      expect.objectContaining({ batch: false, service_tier: "flex", num_model_requests: 4 }),
      expect.objectContaining({ batch: true, service_tier: "batch", num_model_requests: 2 }),
    ]);
    expect(q("completions", { batch: "false" }).map((r) => r.num_model_requests)).toEqual([7]);
    expect(q("completions", { batch: "true" }).map((r) => r.num_model_requests)).toEqual([2]);
    expect(q("completions", {}).map((r) => [r.batch, r.service_tier])).toEqual([[null, null]]);
    // A million tokens at 1 per million: the batch and the flex requests at half, the interactive ones whole.
    expect(q("costs", {})[0]).toMatchObject({ amount: { value: 2, currency: "usd" } });
  });
});
