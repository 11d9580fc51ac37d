// What a user sees of the result cache, through the real service on the generated model: a batch's repeats and a
// re-run counted in cached_lines, their input tokens in usage's cached_tokens, their cost at the cached input price
// (a tenth of input by default) with no output; the usage and costs APIs, /metrics and a synchronous answer agree.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { openaiClient, startTestService, type TestService, waitForClientBatch } from "../helpers/service.js";

const PER_M = { input: 2, output: 8 };
let svc: TestService;
let dir: string;
const began = Math.floor(Date.now() / 1000) - 60;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-cached-counts-"));
  const gguf = await ensureGeneratedModel();
  const file = path.join(dir, "models.yaml");
  const price = `price: { input_per_million: ${PER_M.input}, output_per_million: ${PER_M.output} }`;
  writeFileSync(file, ["models:", `  - { name: priced, local: { path: "${gguf}" }, ${price} }`].join("\n"));
  svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: file, CONTEXT_SIZE: "512" });
}, 120_000);
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

const line = (id: string, content: string) =>
  JSON.stringify({
    custom_id: id,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model: "priced", messages: [{ role: "user", content }], temperature: 0, max_tokens: 6 },
  });

type OutLine = { custom_id: string; cached?: string; response: { body: any } };

async function run(lines: string[]) {
  const client = openaiClient(svc);
  const file = await client.files.create({ file: await toFile(Buffer.from(lines.join("\n")), "in.jsonl"), purpose: "batch" });
  const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  const batch = (await waitForClientBatch(client, created.id, 120_000)) as any;
  expect(batch.status).toBe("completed");
  const text = await (await client.files.content(batch.output_file_id!)).text();
  const out = text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as OutLine);
  return { batch, out };
}

/** The cost the rule gives: fresh input at the input price, cached input at a tenth of it, computed output only. */
function expectedCost(out: OutLine[]) {
  let amount = 0;
  for (const l of out) {
    const u = l.response.body.usage;
    const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
    const output = l.cached ? 0 : u.completion_tokens;
    amount += ((u.prompt_tokens - cached) * PER_M.input + (cached * PER_M.input) / 10 + output * PER_M.output) / 1e6;
  }
  return amount;
}

const sum = (out: OutLine[], f: (l: OutLine) => number) => out.reduce((n, l) => n + f(l), 0);
const metric = (text: string, name: string, labels: string) => {
  const found = text.split("\n").find((l) => l.startsWith(`${name}{`) && labels.split(",").every((kv) => l.includes(kv)));
  return found ? Number(found.split(" ").at(-1)) : 0;
};

describe("what a user sees of the result cache", () => {
  let first: Awaited<ReturnType<typeof run>>;
  const lines = [line("a", "Tell me"), line("b", "Tell me"), line("c", "Tell me"), line("d", "Other thing")];

  it("counts a batch's repeats in cached_lines, their prompt in cached_tokens, and charges them no output", async () => {
    const before = await (await fetch(`${svc.baseUrl}/metrics`)).text();
    first = await run(lines);
    const { batch, out } = first;
    const repeats = out.filter((l) => l.cached);
    // In flight together they are duplicates; one that starts after the first is stored is a hit.
    expect(repeats).toHaveLength(2);
    for (const l of repeats) expect(["duplicate", "hit"]).toContain(l.cached);
    expect(repeats.every((l) => ["a", "b", "c"].includes(l.custom_id))).toBe(true);
    for (const l of repeats) expect(l.response.body.usage.prompt_tokens_details.cached_tokens).toBe(l.response.body.usage.prompt_tokens);
    expect(batch.cached_lines).toBe(2);
    expect(batch.request_counts).toEqual({ completed: 4, failed: 0, total: 4 });
    expect(batch.usage.input_tokens).toBe(sum(out, (l) => l.response.body.usage.prompt_tokens));
    expect(batch.usage.input_tokens_details.cached_tokens).toBe(sum(repeats, (l) => l.response.body.usage.prompt_tokens));
    // Output is reported for every line, as OpenAI reports a cached answer's; the cached lines' part is said apart.
    expect(batch.usage.output_tokens).toBe(sum(out, (l) => l.response.body.usage.completion_tokens));
    expect(batch.usage.output_tokens_details.cached_tokens).toBe(sum(repeats, (l) => l.response.body.usage.completion_tokens));
    expect(batch.cost.amount).toBeCloseTo(expectedCost(out), 6);

    const after = await (await fetch(`${svc.baseUrl}/metrics`)).text();
    const delta = (name: string, labels: string) => metric(after, name, labels) - metric(before, name, labels);
    const kinds = ["duplicate", "hit"].map((k) => delta("obi_result_cache_hits_total", `kind="${k}",model="priced"`));
    expect(kinds[0] + kinds[1]).toBe(2);
    expect(delta("obi_result_cache_misses_total", 'model="priced"')).toBe(2);
    expect(Number(/^obi_result_cache_entries(?:\{[^}]*\})? (\d+)$/m.exec(after)?.[1])).toBeGreaterThanOrEqual(2);
    expect(after).toMatch(/^obi_result_cache_bytes(\{[^}]*\})? [1-9]/m);
    expect(after).toMatch(/^obi_result_cache_evictions_total(\{[^}]*\})? 0$/m);
  }, 180_000);

  it("answers a re-run wholly from the cache, at most a tenth of the first run's cost", async () => {
    const { batch, out } = await run(lines);
    expect(out.map((l) => l.cached)).toEqual(["hit", "hit", "hit", "hit"]);
    expect(batch.cached_lines).toBe(4);
    expect(batch.usage.input_tokens_details.cached_tokens).toBe(batch.usage.input_tokens);
    expect(batch.usage.input_tokens).toBe(first.batch.usage.input_tokens);
    expect(batch.usage.output_tokens_details.cached_tokens).toBe(batch.usage.output_tokens);
    expect(batch.cost.amount).toBeCloseTo((batch.usage.input_tokens * PER_M.input) / 10 / 1e6, 6);
    expect(batch.cost.amount).toBeLessThanOrEqual(first.batch.cost.amount / 10);
    // The list shows the same count as the batch read alone.
    const listed = (await openaiClient(svc).batches.list()).data.find((b) => b.id === batch.id) as any;
    expect(listed.cached_lines).toBe(4);
  }, 180_000);

  it("gives a synchronous repeat OpenAI's cached prompt usage, and the usage and costs APIs count it so", async () => {
    const client = openaiClient(svc);
    const ask = () =>
      client.chat.completions.create({
        model: "priced",
        messages: [{ role: "user", content: "Say it once" }],
        temperature: 0,
        max_tokens: 5,
      });
    const computed = await ask();
    const repeat = await ask();
    expect(repeat.choices[0].message.content).toBe(computed.choices[0].message.content);
    // The computed one may reuse the engine's cached prefix (the chat template's); the repeat's prompt is all cached.
    expect(repeat.usage?.prompt_tokens_details?.cached_tokens).toBe(repeat.usage?.prompt_tokens);

    const get = async (p: string) => (await fetch(`${svc.baseUrl}${p}?start_time=${began}&bucket_width=1d`)).json();
    const results = (page: any) => page.data.flatMap((b: any) => b.results);
    const usage = results(await get("/v1/organization/usage/completions"));
    const cachedTokens = usage.reduce((n: number, r: any) => n + r.input_cached_tokens, 0);
    const inputTokens = usage.reduce((n: number, r: any) => n + r.input_tokens, 0);
    expect(cachedTokens).toBeGreaterThan(0);
    expect(cachedTokens).toBeLessThan(inputTokens);
    const costs = results(await get("/v1/organization/costs"));
    const charged = costs.reduce((n: number, r: any) => n + r.amount.value, 0);
    const outputTokens = usage.reduce((n: number, r: any) => n + r.output_tokens, 0);
    // Less than every token at its full price: cached prompts at a tenth, cached answers' output not at all.
    expect(charged).toBeGreaterThan(0);
    expect(charged).toBeLessThan(
      ((inputTokens - cachedTokens) * PER_M.input + cachedTokens * PER_M.input + outputTokens * PER_M.output) / 1e6,
    );
  }, 180_000);
});
