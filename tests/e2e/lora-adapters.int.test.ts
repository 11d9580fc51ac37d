// LoRA adapters through the real service: a models file lists a base with three adapters, GET /v1/models names each
// adapter's parent, a batch mixing the base and the adapters answers every line as that model's batch alone does,
// with each model's usage and cost its own (at its own price, in the batch and in the usage report), and a
// synchronous request to an adapter gets the adapter's answer.
import { readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeGeneratedLora } from "../../engine/load/generated-lora.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { completionLines, jsonl } from "../../testkit/workload.js";
import { isFinal, pollBatch, resultLines, uploadJsonl } from "../helpers/http-batches.js";
import { scratchDir } from "../helpers/scratch.js";
import { openaiClient, startTestService, type TestService } from "../helpers/service.js";

const ADAPTERS = ["sentiment-v2", "summary-v1", "labels-v3"];
const MODELS = ["base", ...ADAPTERS];
/** Listed with a price in another currency, and run by no batch here. */
const EURO = "euro-v1";
/** Output prices per million tokens: one adapter has its own, the others take the base's. */
const OUTPUT_PRICE: Record<string, number> = { base: 2, "sentiment-v2": 20 };
const scratch = scratchDir("lora-e2e");
let svc: TestService;

beforeAll(async () => {
  const base = await ensureGeneratedModel();
  const file = await scratch.file("models.yaml");
  const dir = path.dirname(file);
  for (const [i, name] of [...ADAPTERS, EURO].entries()) await writeGeneratedLora(base, path.join(dir, `${name}.gguf`), i + 2);
  writeFileSync(
    file,
    [
      "models:",
      "  - name: base",
      `    price: { input_per_million: 1, output_per_million: ${OUTPUT_PRICE.base} }`,
      "    local:",
      `      path: ${base}`,
      "      sequences: 4",
      "      context_size: 256",
      "      adapters:",
      ...ADAPTERS.map(
        (name) =>
          `        - { name: ${name}, path: ./${name}.gguf, scale: 1.0${name in OUTPUT_PRICE ? `, price: { input_per_million: 1, output_per_million: ${OUTPUT_PRICE[name]} }` : ""} }`,
      ),
      `        - { name: ${EURO}, path: ./${EURO}.gguf, price: { currency: EUR, input_per_million: 1, output_per_million: 1 } }`,
    ].join("\n"),
  );
  svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: file });
});
afterAll(() => svc?.close());

/** Each model's answers to the same four prompts, by model then prompt. */
const PROMPTS = 4;
const linesOf = (model: string, prefix: string) =>
  completionLines(PROMPTS, { model, prefix: `${prefix}-${model}`, prompt: (i) => `Once upon a time, story ${i}:` });

/** Runs the lines as one batch (every line computed, none read from the result cache): its answers, and the batch. */
async function runBatch(lines: object[]): Promise<{ answers: Map<string, string>; batch: any }> {
  const file = await uploadJsonl(svc.baseUrl, jsonl(lines));
  const created = await openaiClient(svc).batches.create({
    input_file_id: file.id,
    endpoint: "/v1/completions",
    completion_window: "24h",
    metadata: { cache: "off" },
  });
  const batch = await pollBatch(svc.baseUrl, created.id, isFinal, 120_000);
  expect(batch.status, JSON.stringify(batch.errors)).toBe("completed");
  const { output, errors } = resultLines(svc.batchDir, created.id);
  expect(errors).toEqual([]);
  return { answers: new Map(output.map((l) => [l.custom_id, `${l.response.body.model}: ${l.response.body.choices[0].text}`])), batch };
}

/** A model's usage at its price in the models file: fresh input at 1, cached input at a tenth of that, output at its own. */
const expectedCost = (model: string, u: any) =>
  Math.round(
    u.input_tokens -
      u.input_tokens_details.cached_tokens +
      u.input_tokens_details.cached_tokens / 10 +
      u.output_tokens * (OUTPUT_PRICE[model] ?? OUTPUT_PRICE.base),
  ) / 1e6;

describe("LoRA adapters in the models file", () => {
  it("lists each adapter as a model whose parent is the base, as vLLM does", async () => {
    const listed: Array<{ id: string; parent?: string | null }> = [];
    for await (const m of openaiClient(svc).models.list()) listed.push(m as never);
    expect(listed.map((m) => [m.id, m.parent])).toEqual([["base", null], ...[...ADAPTERS, EURO].map((a) => [a, "base"])]);
  });

  it("a batch mixing the base and three adapters answers every line on its own model, as each model's batch alone, and counts each model's usage and cost", async () => {
    const start = Math.floor(Date.now() / 1000) - 1;
    const alone = new Map<string, string>();
    const aloneUsage = new Map<string, any>();
    for (const m of MODELS) {
      const { answers, batch } = await runBatch(linesOf(m, "alone"));
      for (const [id, text] of answers) alone.set(id.replace(/^alone/, ""), text);
      aloneUsage.set(m, batch.usage);
      expect(batch.usage_by_model).toBeUndefined();
    }
    // Interleaved: the base's line 0, each adapter's line 0, the base's line 1, ...
    const mixed = Array.from({ length: PROMPTS }, (_, i) => MODELS.map((m) => linesOf(m, "mixed")[i]!)).flat();
    const { answers, batch } = await runBatch(mixed);
    expect(answers.size).toBe(MODELS.length * PROMPTS);
    for (const [id, text] of answers) expect(text, id).toBe(alone.get(id.replace(/^mixed/, "")));
    // The adapters' answers are their own: none is the base's.
    for (const a of ADAPTERS) expect(alone.get(`-${a}-0`)).not.toBe(alone.get("-base-0")?.replace(/^base/, a));

    // Each model's share: its lines, the tokens its batch alone took, its cost at its own price; the batch's are the sums.
    const byModel = batch.usage_by_model;
    expect(Object.keys(byModel)).toEqual(MODELS);
    let cost = 0;
    for (const m of MODELS) {
      expect(byModel[m].request_counts, m).toEqual({ completed: PROMPTS, failed: 0, total: PROMPTS });
      expect([byModel[m].usage.input_tokens, byModel[m].usage.output_tokens], m).toEqual([
        aloneUsage.get(m).input_tokens,
        aloneUsage.get(m).output_tokens,
      ]);
      expect(byModel[m].cost.amount, m).toBeCloseTo(expectedCost(m, byModel[m].usage), 6);
      cost += byModel[m].cost.amount;
    }
    const sum = (f: (u: any) => number) => MODELS.reduce((n, m) => n + f(byModel[m].usage), 0);
    expect([batch.usage.input_tokens, batch.usage.output_tokens]).toEqual([sum((u) => u.input_tokens), sum((u) => u.output_tokens)]);
    expect(batch.cost.amount).toBeCloseTo(cost, 6);

    // The usage report counts each model's share under that model: its batch alone and its lines of the mixed one.
    const page: any = await (await fetch(`${svc.baseUrl}/v1/organization/usage/completions?start_time=${start}&group_by=model`)).json();
    const results = page.data.flatMap((b: any) => b.results);
    for (const m of MODELS) {
      const mine = results.filter((r: any) => r.model === m);
      expect(
        mine.reduce((n: number, r: any) => n + r.num_model_requests, 0),
        m,
      ).toBe(2 * PROMPTS);
      expect(
        mine.reduce((n: number, r: any) => n + r.output_tokens, 0),
        m,
      ).toBe(aloneUsage.get(m).output_tokens + byModel[m].usage.output_tokens);
    }
  });

  it("retries a mixed batch's failed lines as one batch over their models", async () => {
    // Lines asking for more tokens than the context holds fail on their own (context_length_exceeded).
    const tooLong = (model: string) => linesOf(model, "long").map((l) => ({ ...l, body: { ...l.body, max_tokens: 1000 } }))[0]!;
    const lines = [linesOf("base", "ok")[0]!, tooLong("base"), tooLong("sentiment-v2"), linesOf("summary-v1", "ok")[0]!];
    const file = await uploadJsonl(svc.baseUrl, jsonl(lines));
    const client = openaiClient(svc);
    const first = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
    const done = await pollBatch(svc.baseUrl, first.id, isFinal, 120_000);
    expect(done.request_counts).toEqual({ completed: 2, failed: 2, total: 4 });
    const retry = await fetch(`${svc.baseUrl}/v1/batches/${first.id}/retry`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(retry.status).toBe(200);
    const again = await pollBatch(svc.baseUrl, ((await retry.json()) as { id: string }).id, isFinal, 120_000);
    expect(again.status, JSON.stringify(again.errors)).toBe("completed");
    expect(Object.entries(again.usage_by_model).map(([m, u]: [string, any]) => [m, u.request_counts])).toEqual([
      ["base", { completed: 0, failed: 1, total: 1 }],
      ["sentiment-v2", { completed: 0, failed: 1, total: 1 }],
    ]);
  });

  it("refuses max_cost on a batch whose models are priced in different currencies, naming them", async () => {
    const file = await uploadJsonl(svc.baseUrl, jsonl([linesOf("base", "eur")[0]!, linesOf(EURO, "eur")[0]!]));
    const batchFolders = () => readdirSync(svc.batchDir).filter((n) => n.startsWith("batch_")).length;
    const folders = batchFolders();
    const res = await fetch(`${svc.baseUrl}/v1/batches`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", metadata: { max_cost: "1" } }),
    });
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(400);
    expect(body.error).toMatchObject({ code: "invalid_metadata", param: "metadata.max_cost" });
    expect(body.error.message).toContain("USD per token and EUR per token");
    // Nothing of the refused batch is left (a folder left behind would read as a crash's at the next start).
    expect(batchFolders()).toBe(folders);
  });

  it("a synchronous request to an adapter gets the adapter's answer", async () => {
    const client = openaiClient(svc);
    const ask = (model: string) =>
      client.completions.create({ model, prompt: "Once upon a time, story 0:", max_tokens: 8, temperature: 0 });
    const [base, adapted] = [await ask("base"), await ask("summary-v1")];
    expect(adapted.model).toBe("summary-v1");
    expect(adapted.choices[0]!.text).not.toBe(base.choices[0]!.text);
  });
});
