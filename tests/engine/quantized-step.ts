// Child process for native.sys.test.ts: one build (argv[2]) runs steps of several tokens on the generated `small`
// model (Q8_0 weights, whose products such steps take through the CPU's widest matrix kernels), and prints which
// build it loaded, what it answered, and how many of its mappings of 32 MiB or more (its KV cache of 64 MiB)
// carry the huge-page advice ("hg" in /proc/self/smaps' VmFlags) that engine/native/llama.cpp-huge-pages.patch
// gives. The advice, not the pages: whether the kernel found huge pages depends on its memory, the advice only on
// the build. A kernel this CPU cannot run ends it with SIGILL.
import { readFileSync } from "node:fs";
import { createEngine } from "../../engine/index.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";

const build = process.argv[2] as "prebuilt" | "patched";
const engine = await createEngine({
  modelPath: await ensureGeneratedModel({ preset: "small" }),
  generatedModel: true,
  gpu: false,
  threads: 1,
  sequences: 4,
  contextSize: 2048,
  embeddingContexts: 1,
  build,
});
const answers = await Promise.all(
  ["The first story:", "A second one, longer:", "Third", "And the fourth of them"].map((prompt) =>
    engine.complete(prompt, { temperature: 0, maxTokens: 4 }),
  ),
);
console.log(JSON.stringify({ build: engine.info.build, tokens: answers.map((a) => a.completionTokens), advised: hugePageAdvised() }));
await engine.close();

/** Anonymous mappings of 32 MiB or more advised onto huge pages; null where /proc/self/smaps cannot be read. */
function hugePageAdvised(): number | null {
  let text: string;
  try {
    text = readFileSync("/proc/self/smaps", "utf8");
  } catch {
    return null;
  }
  let advised = 0;
  let size = 0;
  for (const line of text.split("\n")) {
    const kb = /^Size:\s+(\d+) kB/.exec(line);
    if (kb) size = Number(kb[1]);
    if (line.startsWith("VmFlags:") && size >= 32 * 1024 && line.split(/\s+/).includes("hg")) advised++;
  }
  return advised;
}
