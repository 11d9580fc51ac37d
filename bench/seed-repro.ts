// How often a seeded line gives a different answer when the batch around it changes (issue: `seed`
// reproducible). The same N seeded chat lines run twice: in order, then shuffled among as many filler lines
// that share their system prompt (other batch neighbours, other prefix-cache hits). Counted once with the
// engine's defaults and once with REPRODUCIBLE=true, with each run's time, so the setting's cost is stated.
//   npx tsx bench/seed-repro.ts [--model PATH] [--lines 400] [--tokens 32] [--temperature 0.8]
import { parseArgs } from "node:util";
import { LlamaBackend } from "../engine/adapter/openai-backend.js";
import { createEngine } from "../engine/index.js";
import { ensureGeneratedModel } from "../engine/load/generated-model.js";
import { parseRequest } from "../openai/parse.js";

const { values: a } = parseArgs({
  options: {
    model: { type: "string" },
    lines: { type: "string", default: "400" },
    tokens: { type: "string", default: "32" },
    temperature: { type: "string", default: "0.8" },
    threads: { type: "string", default: "0" },
  },
});
const modelPath = a.model ?? (await ensureGeneratedModel({ preset: "small" }));
const n = Number(a.lines);
const system = "You label short sentences about animals, weather and food. Answer with a few words.";
const line = (i: number, seed: number) => ({
  messages: [
    { role: "system", content: system },
    { role: "user", content: `Sentence ${i}: the little dog played in the sun near the river.` },
  ],
  temperature: Number(a.temperature),
  seed,
  max_tokens: Number(a.tokens),
});
const seeded = Array.from({ length: n }, (_, i) => ({ id: `s${i}`, body: line(i, 1000 + i) }));
const fillers = Array.from({ length: n }, (_, i) => ({ id: `f${i}`, body: line(n + i, i) }));
/** A fixed shuffle (no Math.random), so runs compare the same orders. */
const shuffled = [...seeded, ...fillers]
  .map((x, i) => ({ x, k: (i * 2_654_435_761) % 4_294_967_291 }))
  .sort((p, q) => p.k - q.k)
  .map((p) => p.x);

async function measure(reproducible: boolean) {
  const engine = await createEngine({
    modelPath,
    generatedModel: false,
    gpu: false,
    threads: Number(a.threads),
    sequences: 0,
    contextSize: 512,
    embeddingContexts: 1,
    reproducible,
  });
  try {
    const backend = new LlamaBackend(engine);
    const run = async (items: typeof seeded) => {
      const answers = new Map<string, string>();
      let next = 0;
      const started = performance.now();
      const worker = async () => {
        while (next < items.length) {
          const item = items[next++];
          const r = await backend.execute(parseRequest("/v1/chat/completions", item.body));
          answers.set(item.id, (r.body as any).choices[0].message.content);
        }
      };
      await Promise.all(Array.from({ length: backend.info.concurrency }, worker));
      return { answers, seconds: (performance.now() - started) / 1000 };
    };
    const first = await run(seeded);
    const second = await run(shuffled);
    const differing = seeded.filter((s) => first.answers.get(s.id) !== second.answers.get(s.id)).length;
    return {
      reproducible,
      differing,
      of: n,
      inOrderSeconds: first.seconds,
      mixedSeconds: second.seconds,
      sequences: engine.info.sequences,
    };
  } finally {
    await engine.close();
  }
}

const rows = [await measure(false), await measure(true)];
console.log(
  JSON.stringify({ model: modelPath.split("/").pop(), temperature: Number(a.temperature), tokens: Number(a.tokens), rows }, null, 2),
);
const [plain, strict] = rows;
console.log(
  `defaults: ${plain.differing}/${plain.of} seeded answers changed with the batch around them; REPRODUCIBLE=true: ${strict.differing}/${strict.of}, ` +
    `at ${(strict.inOrderSeconds / plain.inOrderSeconds).toFixed(1)}x the time (${plain.inOrderSeconds.toFixed(1)} s vs ${strict.inOrderSeconds.toFixed(1)} s for ${n} lines)`,
);
