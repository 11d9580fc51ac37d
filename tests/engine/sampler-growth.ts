// Child process for sampler-memory.sys.test.ts: the engine on the generated `small` model (32,000-token vocabulary,
// 384 KB of sampler buffer per request) runs 1-token requests and prints how much its RSS grew.

import { createEngine } from "../../engine/index.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";

const requests = Number(process.argv[2] ?? 800);
const engine = await createEngine({
  modelPath: await ensureGeneratedModel({ preset: "small" }),
  generatedModel: true,
  gpu: false,
  threads: 1,
  sequences: 8,
  contextSize: 64,
  embeddingContexts: 1,
});
const wave = (n: number, from: number) =>
  Promise.all(Array.from({ length: n }, (_, i) => engine.complete(`Story ${from + i}:`, { temperature: 0, maxTokens: 1 })));
await wave(64, 0);
const before = process.memoryUsage().rss;
for (let done = 0; done < requests; done += 64) await wave(64, done);
const growthMiB = Math.round((process.memoryUsage().rss - before) / 2 ** 20);
await engine.close();
console.log(JSON.stringify({ requests, growthMiB, gc: typeof (globalThis as { gc?: unknown }).gc === "function" }));
