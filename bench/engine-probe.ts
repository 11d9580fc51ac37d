// The project's engine (and pipeline) without the HTTP service, one configuration per process.
//   --mode complete   `requests` engine.complete calls, `concurrency` at a time (1 = one request after
//                     the other)
//   --mode pipeline   the same requests as a batch file through pipeline/run-batch.ts (what a batch job runs)
//   --mode embed      `requests` embedding inputs, all submitted at once, over `embedding-contexts` contexts
// Engine settings left at 0 are chosen by the engine, as the service would. --budget-seconds N (complete mode):
// no new request starts after N seconds; throughput is then over the requests that ran.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { LlamaBackend } from "../engine/adapter/openai-backend.js";
import { createEngine, type Engine } from "../engine/index.js";
import { runBatchFile } from "../pipeline/run-batch.js";
import { completionLines, prompt, sharedSystemPrompt, writeBatchFile } from "../testkit/workload.js";
import { readMemory } from "./proc-stats.js";

const { values: a } = parseArgs({
  options: {
    mode: { type: "string", default: "complete" },
    model: { type: "string" },
    threads: { type: "string", default: "0" },
    sequences: { type: "string", default: "0" },
    context: { type: "string", default: "1024" },
    "embedding-contexts": { type: "string", default: "1" },
    requests: { type: "string", default: "256" },
    tokens: { type: "string", default: "64" },
    concurrency: { type: "string", default: "0" },
    "shared-prefix": { type: "boolean", default: false },
    "no-prefix-reuse": { type: "boolean", default: false },
    "budget-seconds": { type: "string", default: "0" },
  },
});
if (!a.model) throw new Error("--model is required");
let requests = Number(a.requests);
const budgetMs = Number(a["budget-seconds"]) * 1000;
const maxTokens = Number(a.tokens);
const prefix = a["shared-prefix"] ? sharedSystemPrompt() : "";

const engine = await createEngine({
  modelPath: a.model,
  generatedModel: false,
  gpu: "auto",
  threads: Number(a.threads),
  sequences: Number(a.sequences),
  contextSize: Number(a.context),
  embeddingContexts: Number(a["embedding-contexts"]),
  prefixReuse: !a["no-prefix-reuse"],
});
const loaded = readMemory();
// As a batch job runs by default (pipeline/run-batch.ts), unless told otherwise.
const concurrency = Number(a.concurrency) > 0 ? Number(a.concurrency) : new LlamaBackend(engine).info.concurrency;

interface Totals {
  generated: number;
  promptTokens: number;
  cachedTokens: number;
  latenciesMs: number[];
}

async function completeMode(started: number): Promise<Totals> {
  const t: Totals = { generated: 0, promptTokens: 0, cachedTokens: 0, latenciesMs: [] };
  let next = 0;
  let ran = 0;
  const worker = async () => {
    for (let i = next++; i < requests; i = next++) {
      if (budgetMs > 0 && performance.now() - started > budgetMs) break;
      ran++;
      const r = await engine.complete(prefix + prompt(i), { temperature: 0, maxTokens });
      t.generated += r.completionTokens;
      t.promptTokens += r.promptTokens;
      t.cachedTokens += r.cachedPromptTokens;
      t.latenciesMs.push(performance.now() - started);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  requests = ran;
  return t;
}

async function pipelineMode(e: Engine): Promise<{ totals: Totals; seconds: number }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-bench-pipeline-"));
  try {
    const input = path.join(dir, "input.jsonl");
    await writeBatchFile(input, completionLines(requests, { maxTokens, prompt: (i) => prefix + prompt(i) }));
    const latenciesMs: number[] = [];
    const started = performance.now();
    const r = await runBatchFile({
      inputPath: input,
      outputPath: path.join(dir, "output.jsonl"),
      errorPath: path.join(dir, "errors.jsonl"),
      endpoint: "/v1/completions",
      backend: new LlamaBackend(e),
      batchSize: 64,
      concurrency,
      onProgress: () => latenciesMs.push(performance.now() - started),
    });
    const seconds = (performance.now() - started) / 1000;
    if (r.failed > 0) throw new Error(`${r.failed} requests failed`);
    const u = r.usage;
    return { totals: { generated: u.completionTokens, promptTokens: u.promptTokens, cachedTokens: u.cachedTokens, latenciesMs }, seconds };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function embedMode(started: number): Promise<Totals> {
  const latenciesMs: number[] = [];
  let promptTokens = 0;
  // One input per call, all at once: the contexts are what limits how many run together.
  await Promise.all(
    Array.from({ length: requests }, async (_, i) => {
      const r = await engine.embed([prefix + prompt(i)]);
      promptTokens += r.promptTokens;
      latenciesMs.push(performance.now() - started);
    }),
  );
  return { generated: 0, promptTokens, cachedTokens: 0, latenciesMs };
}

let totals: Totals;
let seconds: number;
if (a.mode === "pipeline") {
  ({ totals, seconds } = await pipelineMode(engine));
} else {
  const started = performance.now();
  totals = a.mode === "embed" ? await embedMode(started) : await completeMode(started);
  seconds = (performance.now() - started) / 1000;
}
const end = readMemory();
const { threads, sequences, gpu } = engine.info;
console.log(
  JSON.stringify({
    kind: a.mode,
    threads,
    sequences,
    gpu,
    concurrency,
    embeddingContexts: Number(a["embedding-contexts"]),
    prefixReuse: !a["no-prefix-reuse"],
    requests,
    seconds,
    ...totals,
    modelRss: loaded?.rss ?? null,
    peakRss: end?.peak ?? null,
  }),
);
await engine.close();
