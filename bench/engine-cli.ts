// Throughput of the engine for many short completions, to choose threads and sequences from measurements.
//   npx tsx bench/engine-cli.ts [modelPath] [--requests 256] [--tokens 64] [--sequences 1,4,8,16,32] [--threads 1,2] [--contexts 1,2]
// (threads 0: the engine's own choice)
// `--workload families-8|families-64|template|retrieval|varied` runs that scheduling workload instead (512 lines,
// or --requests), in the order the service would start them (pipeline/schedule.ts). `--kv-unified true` gives each
// context one KV cache for all its sequences instead of a stream per sequence (the patched build's KV_UNIFIED).
// Each configuration runs in a fresh engine; all requests are submitted at once and queue for sequences.
// Besides time it prints the engine's counters: decodes, the passes llama.cpp cut them into, tokens evaluated.
import { parseArgs } from "node:util";
import { createEngine, type GenerationResult } from "../engine/index.js";
import { prompt } from "../testkit/workload.js";
import { type EngineRequest, engineRequests } from "./scheduling-workloads.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    requests: { type: "string" },
    tokens: { type: "string", default: "64" },
    sequences: { type: "string", default: "1,4,8,16,32" },
    threads: { type: "string", default: "1,2" },
    context: { type: "string", default: "1024" },
    contexts: { type: "string", default: "1" },
    workload: { type: "string" },
    "kv-unified": { type: "string", default: "false" },
  },
});
const modelPath = positionals[0] ?? process.env.MODEL_PATH ?? new URL("../../shared/models/stories260K.gguf", import.meta.url).pathname;
const list = (s: string) => s.split(",").map(Number);
if (values["kv-unified"] !== "true" && values["kv-unified"] !== "false")
  throw new Error(`--kv-unified must be true or false, got ${values["kv-unified"]}`);

for (const contexts of list(values.contexts))
  for (const threads of list(values.threads)) {
    for (const sequences of list(values.sequences)) {
      const engine = await createEngine({
        modelPath,
        generatedModel: false,
        gpu: "auto",
        threads,
        sequences,
        contextSize: Number(values.context),
        embeddingContexts: 1,
        contexts,
        kvUnified: values["kv-unified"] === "true",
      });
      const requests: EngineRequest[] = values.workload
        ? engineRequests(values.workload, Number(values.requests ?? 512))
        : Array.from({ length: Number(values.requests ?? 256) }, (_, i) => ({ prompt: prompt(i), maxTokens: Number(values.tokens) }));
      const before = engine.scheduling();
      const started = performance.now();
      const results: GenerationResult[] = await Promise.all(
        requests.map((r) =>
          "messages" in r
            ? engine.chat(r.messages, { temperature: 0, maxTokens: r.maxTokens })
            : engine.complete(r.prompt, { temperature: 0, maxTokens: r.maxTokens }),
        ),
      );
      const seconds = (performance.now() - started) / 1000;
      const generated = results.reduce((n, r) => n + r.completionTokens, 0);
      const cached = results.reduce((n, r) => n + r.cachedPromptTokens, 0);
      const after = engine.scheduling();
      console.log(
        JSON.stringify({
          workload: values.workload ?? "uniform",
          build: engine.info.build,
          gpu: engine.info.gpu,
          contexts: engine.info.contexts,
          kvUnified: engine.info.kvUnified,
          threads: engine.info.threads,
          sequences: engine.info.sequences,
          requests: requests.length,
          seconds: +seconds.toFixed(2),
          generated,
          tokensPerSecond: Math.round(generated / seconds),
          cachedPromptTokens: cached,
          decodes: after.steps - before.steps,
          sequencesPerDecode: +((after.sequences - before.sequences) / Math.max(1, after.steps - before.steps)).toFixed(1),
          microBatches: after.microBatches - before.microBatches,
          evaluatedTokens: after.evaluatedTokens - before.evaluatedTokens,
          prefixCopies: after.prefixCopies - before.prefixCopies,
        }),
      );
      await engine.close();
    }
  }
