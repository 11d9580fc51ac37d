// Child process for native.sys.test.ts: one build (argv[2]) runs steps of several tokens on the generated `small`
// model (Q8_0 weights, whose products such steps take through the CPU's widest matrix kernels), and prints which
// build it loaded and what it answered. A kernel this CPU cannot run ends it with SIGILL.

import { createEngine } from "../../engine/index.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";

const build = process.argv[2] as "prebuilt" | "patched";
const engine = await createEngine({
  modelPath: await ensureGeneratedModel({ preset: "small" }),
  generatedModel: true,
  gpu: false,
  threads: 1,
  sequences: 4,
  contextSize: 128,
  embeddingContexts: 1,
  build,
});
const answers = await Promise.all(
  ["The first story:", "A second one, longer:", "Third", "And the fourth of them"].map((prompt) =>
    engine.complete(prompt, { temperature: 0, maxTokens: 4 }),
  ),
);
console.log(JSON.stringify({ build: engine.info.build, tokens: answers.map((a) => a.completionTokens) }));
await engine.close();
