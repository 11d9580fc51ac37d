// Several generation contexts: requests spread over them (the least busy first), each context batches its
// own sequences, and the answers are the ones a single context gives.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tokenizePrompt } from "../../engine/generate/tokens.js";
import { createEngine, type Engine } from "../../engine/index.js";
import { loadLlama, loadModel } from "../../engine/load/load.js";
import { SequencePool } from "../../engine/pool/sequence-pool.js";
import { BATCH_WORK } from "../../engine/types.js";
import { testModelPath } from "../../testkit/model.js";
import { prompt } from "../../testkit/workload.js";

const make = async (contexts: number) =>
  createEngine({
    modelPath: await testModelPath(),
    generatedModel: false,
    gpu: false,
    threads: 1,
    sequences: 4,
    contexts,
    contextSize: 256,
    embeddingContexts: 1,
  });

let one: Engine;
let two: Engine;
beforeAll(async () => {
  [one, two] = [await make(1), await make(2)];
});
afterAll(async () => {
  await Promise.all([one?.close(), two?.close()]);
});

describe("generation contexts", () => {
  it("spreads the sequences over the contexts and says so", () => {
    expect(one.info).toMatchObject({ contexts: 1, sequences: 4 });
    expect(two.info).toMatchObject({ contexts: 2, sequences: 4 });
  });

  it("answers greedy requests as one context does, all of them at once", async () => {
    const greedy = { temperature: 0, maxTokens: 12 };
    const prompts = Array.from({ length: 8 }, (_, i) => prompt(i));
    const a = await Promise.all(prompts.map((p) => one.complete(p, greedy)));
    const b = await Promise.all(prompts.map((p) => two.complete(p, greedy)));
    expect(b.map((r) => r.completionTokens)).toEqual(a.map((r) => r.completionTokens));
    // llama.cpp is not batch-invariant (engine/README.md): most answers match to the letter, a late token may not.
    const same = a.filter((r, i) => r.text === b[i].text).length;
    expect(same).toBeGreaterThanOrEqual(6);
  });
});

describe("SequencePool over several contexts", () => {
  it("lends each new request a sequence of the least busy context, unless another holds or evaluates its prefix", async () => {
    const llama = await loadLlama(false, () => {});
    const model = await loadModel(llama, await testModelPath(), () => {});
    const pool = await SequencePool.create(model, {
      sequences: 4,
      contexts: 2,
      auto: false,
      contextSize: 128,
      threads: 1,
      flashAttention: false,
      log: () => {},
    });
    try {
      expect(pool.contexts.map((c) => c.totalSequences)).toEqual([2, 2]);
      const tokens = tokenizePrompt(model, `${prompt(1)} ${"and the sun was warm ".repeat(4)}`);
      const a = await pool.acquire(tokens, BATCH_WORK);
      const b = await pool.acquire(tokenizePrompt(model, "The big red truck drove down the hill to the farm."), BATCH_WORK);
      expect(a.context).not.toBe(b.context);
      // The same family: it joins the context where its prefix is being evaluated, to copy it (prefix-share.ts).
      const family = await pool.acquire(tokens, BATCH_WORK);
      expect(family.context).toBe(a.context);
      await pool.release(family);
      // A prompt already in a free sequence's cache goes to that sequence, whatever its context's load.
      await a.evaluateWithoutGeneratingNewTokens(tokens);
      pool.evaluated(a);
      await pool.release(a);
      const c = await pool.acquire(tokens, BATCH_WORK);
      expect(c).toBe(a);
      await Promise.all([pool.release(b), pool.release(c)]);
    } finally {
      await pool.close();
      await model.dispose();
      await llama.dispose();
    }
  });
});
