// Throughput of the engine for many short completions, to choose threads and sequences from measurements.
//   npx tsx bench/engine-cli.ts [modelPath] [--requests 256] [--tokens 64] [--sequences 1,4,8,16,32] [--threads 1,2] [--contexts 1,2]
// (threads 0: the engine's own choice)
// Each configuration runs in a fresh engine; all requests are submitted at once and queue for sequences.
import { parseArgs } from "node:util";
import { createEngine } from "../engine/index.js";
import { prompt } from "../testkit/workload.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    requests: { type: "string", default: "256" },
    tokens: { type: "string", default: "64" },
    sequences: { type: "string", default: "1,4,8,16,32" },
    threads: { type: "string", default: "1,2" },
    context: { type: "string", default: "1024" },
    contexts: { type: "string", default: "1" },
  },
});
const modelPath = positionals[0] ?? process.env.MODEL_PATH ?? new URL("../../shared/models/stories260K.gguf", import.meta.url).pathname;
const list = (s: string) => s.split(",").map(Number);

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
      });
      const requests = Number(values.requests);
      const started = performance.now();
      const results = await Promise.all(
        Array.from({ length: requests }, (_, i) => engine.complete(prompt(i), { temperature: 0, maxTokens: Number(values.tokens) })),
      );
      const seconds = (performance.now() - started) / 1000;
      const generated = results.reduce((n, r) => n + r.completionTokens, 0);
      const cached = results.reduce((n, r) => n + r.cachedPromptTokens, 0);
      console.log(
        JSON.stringify({
          gpu: engine.info.gpu,
          contexts: engine.info.contexts,
          threads: engine.info.threads,
          sequences,
          requests,
          seconds: +seconds.toFixed(2),
          generated,
          tokensPerSecond: Math.round(generated / seconds),
          cachedPromptTokens: cached,
        }),
      );
      await engine.close();
    }
  }
