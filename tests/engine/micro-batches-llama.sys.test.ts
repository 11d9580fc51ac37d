// The micro-batch model (engine/pool/micro-batches.ts) against llama.cpp itself: with LLAMA_KV_CACHE_DEBUG set, llama.cpp
// logs each micro-batch's KV streams as it places them, consecutive ids within one micro-batch, so a break in the
// run of ids starts the next. The engine's count must equal the log's, on both builds, for decodes that mix
// generating sequences with prompt tails of unequal lengths on scattered sequences. An upgrade of node-llama-cpp
// that changes llama.cpp's rule fails here. In the system tier, whose files each run in a fresh module graph: an
// integration file shares its worker's node-llama-cpp with the files before it, and llama.cpp's log reaches only
// the first Llama of a binding (see below).
import { afterAll, describe, expect, it } from "vitest";
import { createEngine, type Engine } from "../../engine/index.js";
import { NO_PATCHED_BUILD, testModelPath } from "../../testkit/model.js";

process.env.LLAMA_KV_CACHE_DEBUG = "1";
const engines: Engine[] = [];
afterAll(async () => {
  await Promise.allSettled(engines.map((e) => e.close()));
  delete process.env.LLAMA_KV_CACHE_DEBUG;
});

/** Micro-batches in llama.cpp's log lines: a stream that does not follow the last one starts a new one. */
function loggedMicroBatches(lines: readonly string[]): number {
  let count = 0;
  let last: number | undefined;
  for (const line of lines) {
    const stream = /find_slot: stream\[(\d+)\], n =/.exec(line);
    if (!stream) continue;
    const id = Number(stream[1]);
    if (last === undefined || id !== last + 1) count++;
    last = id;
  }
  return count;
}

const prompts = Array.from({ length: 24 }, (_, i) => `Item ${i}: ${"a little more text ".repeat(1 + (i % 7))}then the question?`);

// Not through engineBuilds(): a build's first Llama must be the engine's own, since node-llama-cpp stops passing
// llama.cpp's messages to the logger of a Llama created after another on the same binding was disposed.
describe.each(["prebuilt", "patched"] as const)("micro-batches on the %s build", (build) => {
  it("counts the passes llama.cpp makes, as its own log shows them", async (ctx) => {
    const lines: string[] = [];
    const engine = await createEngine({
      modelPath: await testModelPath(),
      generatedModel: false,
      gpu: false,
      threads: 1,
      sequences: 8,
      // One context: its log lines are not interleaved with another context's.
      contexts: 1,
      contextSize: 512,
      embeddingContexts: 1,
      build,
      llamaDebugLog: true,
      log: (m) => lines.push(m),
    }).catch((err: Error) => {
      if (build === "patched" && /not built here/.test(err.message)) return undefined;
      throw err;
    });
    if (!engine) {
      console.warn(NO_PATCHED_BUILD);
      return ctx.skip();
    }
    engines.push(engine);
    lines.length = 0;
    const before = engine.scheduling();
    await Promise.all(prompts.map((p, i) => engine.complete(p, { temperature: 0, maxTokens: 4 + (i % 9) })));
    const after = engine.scheduling();
    await engine.close();
    const counted = after.microBatches - before.microBatches;
    // Prompts of unequal lengths joined generating sequences: more passes than decodes.
    expect(counted).toBeGreaterThan(after.steps - before.steps);
    expect(counted).toBe(loggedMicroBatches(lines));
  });
});
