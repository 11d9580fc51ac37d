// LoRA adapters through the real service: a models file lists a base with three adapters, GET /v1/models names each
// adapter's parent, a batch mixing the base and the adapters answers every line as that model's batch alone does,
// and a synchronous request to an adapter gets the adapter's answer.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeGeneratedLora } from "../../engine/load/generated-lora.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { completionLines, jsonl } from "../../testkit/workload.js";
import { createBatch, isFinal, pollBatch, resultLines, uploadJsonl } from "../helpers/http-batches.js";
import { scratchDir } from "../helpers/scratch.js";
import { openaiClient, startTestService, type TestService } from "../helpers/service.js";

const ADAPTERS = ["sentiment-v2", "summary-v1", "labels-v3"];
const MODELS = ["base", ...ADAPTERS];
const scratch = scratchDir("lora-e2e");
let svc: TestService;

beforeAll(async () => {
  const base = await ensureGeneratedModel();
  const file = await scratch.file("models.yaml");
  const dir = path.dirname(file);
  for (const [i, name] of ADAPTERS.entries()) await writeGeneratedLora(base, path.join(dir, `${name}.gguf`), i + 2);
  writeFileSync(
    file,
    [
      "models:",
      "  - name: base",
      "    local:",
      `      path: ${base}`,
      "      sequences: 4",
      "      context_size: 256",
      "      adapters:",
      ...ADAPTERS.map((name) => `        - { name: ${name}, path: ./${name}.gguf, scale: 1.0 }`),
    ].join("\n"),
  );
  svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: file });
});
afterAll(() => svc?.close());

/** Each model's answers to the same four prompts, by model then prompt. */
const PROMPTS = 4;
const linesOf = (model: string, prefix: string) =>
  completionLines(PROMPTS, { model, prefix: `${prefix}-${model}`, prompt: (i) => `Once upon a time, story ${i}:` });

async function runBatch(lines: object[]): Promise<Map<string, string>> {
  const file = await uploadJsonl(svc.baseUrl, jsonl(lines));
  const created = await createBatch(svc.baseUrl, file.id);
  expect(created.status).toBe(200);
  const done = await pollBatch(svc.baseUrl, created.body.id, isFinal, 120_000);
  expect(done.status, JSON.stringify(done.errors)).toBe("completed");
  const { output, errors } = resultLines(svc.batchDir, created.body.id);
  expect(errors).toEqual([]);
  return new Map(output.map((l) => [l.custom_id, `${l.response.body.model}: ${l.response.body.choices[0].text}`]));
}

describe("LoRA adapters in the models file", () => {
  it("lists each adapter as a model whose parent is the base, as vLLM does", async () => {
    const listed: Array<{ id: string; parent?: string | null }> = [];
    for await (const m of openaiClient(svc).models.list()) listed.push(m as never);
    expect(listed.map((m) => [m.id, m.parent])).toEqual([["base", null], ...ADAPTERS.map((a) => [a, "base"])]);
  });

  it("a batch mixing the base and three adapters answers every line on its own model, as each model's batch alone", async () => {
    const alone = new Map<string, string>();
    for (const m of MODELS) for (const [id, text] of await runBatch(linesOf(m, "alone"))) alone.set(id.replace(/^alone/, ""), text);
    // Interleaved: the base's line 0, each adapter's line 0, the base's line 1, ...
    const mixed = Array.from({ length: PROMPTS }, (_, i) => MODELS.map((m) => linesOf(m, "mixed")[i]!)).flat();
    const answers = await runBatch(mixed);
    expect(answers.size).toBe(MODELS.length * PROMPTS);
    for (const [id, text] of answers) expect(text, id).toBe(alone.get(id.replace(/^mixed/, "")));
    // The adapters' answers are their own: none is the base's.
    for (const a of ADAPTERS) expect(alone.get(`-${a}-0`)).not.toBe(alone.get("-base-0")?.replace(/^base/, a));
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
