// Threads chosen per decode on CPU: a large step computes on all cores, a small one on the spare ones, and
// node-llama-cpp really decodes with what the budget said (read back from llama.cpp after each decode).

import type { Llama, LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generate } from "../../engine/generate/generate.js";
import { tokenizePrompt } from "../../engine/generate/tokens.js";
import { loadLlama, loadModel } from "../../engine/load/load.js";
import { ALL_CORES_STEP_WORK } from "../../engine/load/threads.js";
import { SequencePool } from "../../engine/pool/sequence-pool.js";
import { parametersPerToken, StepThreads } from "../../engine/pool/step-threads.js";
import { BATCH_WORK } from "../../engine/types.js";
import { testModelPath } from "../../testkit/model.js";
import { PLAIN } from "./plain-request.js";

let llama: Llama;
let model: LlamaModel;

beforeAll(async () => {
  llama = await loadLlama(false, () => {});
  model = await loadModel(llama, await testModelPath(), () => {});
});

afterAll(async () => {
  await model?.dispose();
  await llama?.dispose();
});

describe("parametersPerToken", () => {
  it("counts every weight a token is multiplied through, not the embedding it is looked up in", () => {
    const tensors = model.fileInfo.tensorInfo ?? [];
    const size = (name: string) => tensors.find((t) => t.name === name)?.dimensions.reduce<number>((n, d) => n * Number(d), 1) ?? 0;
    const all = tensors.reduce((n, t) => n + t.dimensions.reduce<number>((m, d) => m * Number(d), 1), 0);
    const output = size("output.weight");
    expect(output).toBeGreaterThan(0);
    expect(parametersPerToken(model)).toBe(all - size("token_embd.weight"));
  });
});

describe("StepThreads", () => {
  it("sets the budget per step and gives it back to the embedding contexts when idle", () => {
    const fake = { maxThreads: 2 } as Llama;
    const perStep = new StepThreads(fake, 2, 1, ALL_CORES_STEP_WORK / 8, 2);
    expect(perStep.contextThreads).toEqual({ ideal: 2, min: 1 });
    perStep.step(8);
    expect(fake.maxThreads).toBe(2);
    perStep.step(1);
    expect(fake.maxThreads).toBe(1);
    perStep.idle();
    expect(fake.maxThreads).toBe(2);
    expect(perStep.stats).toEqual({ allCores: 1, spare: 1 });
  });

  it("makes node-llama-cpp decode a long prompt on all cores and single tokens on one", async () => {
    // Scaled so a step of 4 tokens or more counts as large on this small test model.
    const perStep = new StepThreads(llama, 2, 1, ALL_CORES_STEP_WORK / 4, 2);
    const steps: { tokens: number; threadsOfPrevious: number }[] = [];
    let pool: SequencePool | undefined;
    pool = await SequencePool.create(model, {
      sequences: 1,
      auto: false,
      contextSize: 256,
      threads: perStep.contextThreads,
      flashAttention: false,
      log: () => {},
      onStep: (tokens) => {
        steps.push({ tokens, threadsOfPrevious: pool!.contexts[0].currentThreads });
        perStep.step(tokens);
      },
      onIdle: () => perStep.idle(),
    });
    try {
      const tokens = tokenizePrompt(model, "Once upon a time, there was a little girl named Lily who loved");
      expect(tokens.length).toBeGreaterThanOrEqual(8);
      const req = {
        tokens,
        maxTokens: 4,
        temperature: 0,
        topP: 1,
        topK: 0,
        seed: 1,
        stopStrings: [],
        stopTokens: new Set<never>(),
        ...PLAIN,
      };
      const r = await generate({ pool, model, req, borrower: BATCH_WORK });
      expect(r.completionTokens).toBe(4);
      // The prompt step, then one step per generated token but the last; a step's threads are read back at the next.
      expect(steps.map((s) => s.tokens)).toEqual([tokens.length, 1, 1, 1]);
      expect(steps.slice(1).map((s) => s.threadsOfPrevious)).toEqual([2, 1, 1]);
      expect(pool.contexts[0].currentThreads).toBe(1);
      expect(llama.maxThreads).toBe(2);
    } finally {
      await pool.close();
    }
  });
});
