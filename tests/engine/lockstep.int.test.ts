// Parallel requests share each decode: with the batch order of batch-order.ts, every sequence that is
// generating joins every step, instead of the sequences drifting into groups decoded in turn.

import type { Llama, LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generate } from "../../engine/generate/generate.js";
import { tokenizePrompt } from "../../engine/generate/tokens.js";
import { loadLlama, loadModel } from "../../engine/load/load.js";
import { loadedBuild } from "../../engine/load/native.js";
import { SequencePool } from "../../engine/pool/sequence-pool.js";
import { BATCH_WORK } from "../../engine/types.js";
import { testModelPath } from "../../testkit/model.js";
import { PLAIN } from "./plain-request.js";

const SEQUENCES = 4;
let llama: Llama;
let model: LlamaModel;
let pool: SequencePool;
/** Each decode's tokens, and the passes over the weights counted up to it (batch-order.ts calls onStep after counting). */
const decodes: Array<{ tokens: number; passes: number }> = [];

beforeAll(async () => {
  const log = () => {};
  llama = await loadLlama(false, log);
  llama.maxThreads = 1;
  model = await loadModel(llama, await testModelPath(), log);
  // Prefix copies off: the prompts share their opening, and a copy would start each follower a step after its head.
  pool = await SequencePool.create(model, {
    sequences: SEQUENCES,
    auto: false,
    contextSize: 256,
    threads: 1,
    flashAttention: false,
    prefixCopy: false,
    onStep: (tokens) => decodes.push({ tokens, passes: pool.batchStats.microBatches }),
    log,
  });
});

afterAll(async () => {
  await pool?.close();
  await model?.dispose();
  await llama?.dispose();
});

/** A greedy request that never stops early on an end-of-text token: it runs its `maxTokens`. */
const request = (text: string, maxTokens: number) => ({
  tokens: tokenizePrompt(model, text),
  maxTokens,
  temperature: 0,
  topP: 1,
  topK: 0,
  seed: 1,
  stopStrings: [],
  ...PLAIN,
  stopTokens: new Set<never>(),
});

describe("lockstep decoding", () => {
  it("keeps every generating sequence in each decode", async () => {
    const before = { ...pool.batchStats };
    const results = await Promise.all(
      Array.from({ length: SEQUENCES }, (_, i) =>
        generate({ pool, model, req: request(`Once upon a time, there was a child number ${i}`, 32), borrower: BATCH_WORK }),
      ),
    );
    const steps = pool.batchStats.steps - before.steps;
    const sequences = pool.batchStats.sequences - before.sequences;
    const generated = results.reduce((n, r) => n + r.completionTokens, 0);
    expect(generated).toBeGreaterThan(SEQUENCES);
    // Without the lockstep the 4 sequences averaged about 2 per decode; with it, all 4 but at the ends.
    expect(sequences / steps).toBeGreaterThan(SEQUENCES - 0.75);
  });
});

const COLOURS = ["Red", "Blue", "Green", "Gold", "Grey", "Pink", "Teal", "Navy"];

describe("a request waiting for a sequence", () => {
  // Where copies and cuts are queued (the patched build). On the prebuilt build a new prompt's cut of the old cache
  // waits for the context lock, which the other sequences' decodes hold, so it joins when they pause.
  it("joins the decode right after the last token of the request it follows, leaving no gap", async (ctx) => {
    if (loadedBuild(llama) !== "patched") {
      console.warn("the lockstep's hand-over to a waiting request is tested on the patched build only; it runs the prebuilt here");
      return ctx.skip();
    }
    // Twice as many requests as sequences, ending at different steps: each later one takes a freed sequence.
    const limits = [6, 10, 14, 18, 30, 30, 30, 30];
    const text = (i: number) => `${COLOURS[i]} fox number ${i} jumped over the lazy dog and ran away home`;
    const first = decodes.length;
    const before = pool.batchStats.microBatches;
    await Promise.all(limits.map((n, i) => generate({ pool, model, req: request(text(i), n), borrower: BATCH_WORK })));
    const run = decodes.slice(first);
    // Up to the decode the last prompt joined. After it the last requests run down, each ending when its own limit
    // says: a sequence that ends before those after it leaves a gap that is not a hand-over's.
    let lastJoin = -1;
    for (const [i, s] of run.entries()) if (s.tokens > SEQUENCES) lastJoin = i;
    expect(lastJoin).toBeGreaterThan(0);
    const handOver = run.slice(0, lastJoin + 1);
    // Every decode holds all sequences while requests wait: a freed sequence left out would make one of SEQUENCES - 1.
    expect(handOver.filter((s) => s.tokens < SEQUENCES)).toEqual([]);
    // One pass a decode, and one more for each prompt: none for a gap where a freed sequence was left out.
    expect(run[lastJoin].passes - before).toBeLessThanOrEqual(handOver.length + limits.length);
  });
});
