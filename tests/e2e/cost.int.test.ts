// What each batch cost, through the real service: the models file prices one model per pool hour and another per
// million tokens; a batch reports its engine seconds by pool and its cost (extension fields, kept by the
// official client), /metrics carries the same by model and pool, and a model without a price reports none.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { completionJsonl } from "../../testkit/workload.js";
import { openaiClient, startTestService, type TestService, waitForBatch } from "../helpers/service.js";

let svc: TestService;
let dir: string;
const SPOT = 0.9;
const DEDICATED = 2.7;
const PER_M = { input: 0.2, cached: 0.05, output: 0.8 };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-cost-"));
  const gguf = await ensureGeneratedModel();
  const file = path.join(dir, "models.yaml");
  writeFileSync(
    file,
    [
      "models:",
      `  - { name: hourly, local: { path: "${gguf}" }, price: { spot_per_hour: ${SPOT}, dedicated_per_hour: ${DEDICATED} } }`,
      `  - { name: tokens, local: { path: "${gguf}" }, price: { currency: EUR, input_per_million: ${PER_M.input}, cached_input_per_million: ${PER_M.cached}, output_per_million: ${PER_M.output} } }`,
      `  - { name: free, local: { path: "${gguf}" } }`,
    ].join("\n"),
  );
  svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: file, CONTEXT_SIZE: "512" });
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function run(model: string, n: number) {
  const client = openaiClient(svc);
  const input = await client.files.create({
    file: await toFile(Buffer.from(completionJsonl(n, { prefix: model, model, maxTokens: 24 })), "in.jsonl"),
    purpose: "batch",
  });
  const created = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/completions", completion_window: "24h" });
  await waitForBatch(svc.baseUrl, created.id, 120_000);
  // Read back with the official client: the extension fields survive its types.
  return (await client.batches.retrieve(created.id)) as any;
}

const metric = (text: string, name: string, labels: string) => {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) && labels.split(",").every((kv) => l.includes(kv)));
  return line ? Number(line.split(" ").at(-1)) : 0;
};

describe("what each batch cost", () => {
  it("prices engine time per pool hour: seconds by pool, cost split the same way, and /metrics agreeing", async () => {
    const before = await (await fetch(`${svc.baseUrl}/metrics`)).text();
    const b = await run("hourly", 12);
    expect(b.status).toBe("completed");
    const pool = b.pool as "spot" | "dedicated";
    const other = pool === "spot" ? "dedicated" : "spot";
    expect(b.engine_seconds[pool]).toBeGreaterThan(0);
    expect(b.engine_seconds[other]).toBe(0);
    const rate = pool === "spot" ? SPOT : DEDICATED;
    expect(b.cost).toMatchObject({ currency: "USD", basis: "pool_hours", [other]: 0 });
    expect(b.cost[pool]).toBeCloseTo((b.engine_seconds[pool] / 3600) * rate, 5);
    expect(b.cost.amount).toBeCloseTo(b.cost[pool], 6);
    const after = await (await fetch(`${svc.baseUrl}/metrics`)).text();
    const labels = `model="hourly",pool="${pool}"`;
    const seconds = metric(after, "obi_engine_seconds_total", labels) - metric(before, "obi_engine_seconds_total", labels);
    expect(seconds).toBeCloseTo(b.engine_seconds[pool], 1);
    const spent =
      metric(after, "obi_cost_total", `${labels},currency="USD"`) - metric(before, "obi_cost_total", `${labels},currency="USD"`);
    expect(spent).toBeCloseTo(b.cost.amount, 4);
    // The list and the console's view carry the same cost.
    const listed = (await openaiClient(svc).batches.list()).data.find((x) => x.id === b.id) as any;
    expect(listed.cost).toEqual(b.cost);
  }, 120_000);

  it("prices tokens per million: fresh input, cached input and output at their rates, in the file's currency", async () => {
    const b = await run("tokens", 6);
    expect(b.status).toBe("completed");
    const u = b.usage;
    const cached = u.input_tokens_details.cached_tokens;
    const expected = ((u.input_tokens - cached) * PER_M.input + cached * PER_M.cached + u.output_tokens * PER_M.output) / 1e6;
    expect(b.cost).toMatchObject({ currency: "EUR", basis: "tokens", spot: null, dedicated: null });
    expect(b.cost.amount).toBeCloseTo(expected, 6);
    expect(b.cost.amount).toBeGreaterThan(0);
  }, 120_000);

  it("a model without a price reports its engine time and no cost", async () => {
    const b = await run("free", 3);
    expect(b.engine_seconds.spot + b.engine_seconds.dedicated).toBeGreaterThan(0);
    expect(b.cost).toBeNull();
  }, 120_000);

  it("a price the models file gets wrong stops the start with one line naming it", async () => {
    const bad = path.join(dir, "bad.yaml");
    writeFileSync(bad, `models:\n  - { name: x, local: { path: "${await ensureGeneratedModel()}" }, price: { spot_per_hour: 1 } }\n`);
    await expect(startTestService({ MODEL_PATH: "", MODELS_FILE: bad })).rejects.toThrow(/price.*dedicated_per_hour/);
  });
});
