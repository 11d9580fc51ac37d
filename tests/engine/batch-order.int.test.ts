// The batching strategy handed to node-llama-cpp: sequences in id order, and each step waits (briefly)
// for the sequences of the last one, so they stay in one decode.

import type { BatchItem, PrioritizedBatchItem, Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { BatchOrder, MAX_WAIT_TURNS, planBatch, sequenceTag } from "../../engine/pool/batch-order.js";
import { BATCH_WORK } from "../../engine/types.js";

const item = (sequence: number, tokens: number): BatchItem => ({
  tokens: Array.from({ length: tokens }, (_, i) => i as BatchItem["tokens"][number]),
  logits: [],
  evaluationPriority: sequenceTag(sequence),
});

const shape = (items: BatchItem[], planned: PrioritizedBatchItem[]) => planned.map((p) => [items.indexOf(p.item), p.processAmount]);

describe("planBatch", () => {
  it("orders the items by sequence, whatever order they were queued in", () => {
    const items = [item(3, 1), item(0, 1), item(2, 1), item(1, 1)];
    expect(shape(items, planBatch(items, 512))).toEqual([
      [1, 1],
      [3, 1],
      [2, 1],
      [0, 1],
    ]);
  });

  it("gives every sequence a token before a prompt takes the rest of the room", () => {
    const items = [item(1, 40), item(0, 1), item(2, 1)];
    expect(shape(items, planBatch(items, 10))).toEqual([
      [1, 1],
      [0, 8],
      [2, 1],
    ]);
  });

  it("never plans more tokens than fit, and leaves out what got none", () => {
    const items = [item(2, 5), item(0, 5), item(1, 5)];
    const planned = planBatch(items, 2);
    expect(planned.map((p) => items.indexOf(p.item))).toEqual([1, 2]);
    expect(planned.reduce((n, p) => n + p.processAmount, 0)).toBe(2);
  });
});

describe("BatchOrder", () => {
  it("waits for a sequence of the last step before decoding without it", () => {
    const order = new BatchOrder();
    expect(order.strategy({ items: [item(0, 1), item(1, 1)], size: 512 })).toHaveLength(2);
    // Sequence 1 has not queued its next token yet: the step waits.
    expect(order.strategy({ items: [item(0, 1)], size: 512 })).toEqual([]);
    expect(order.strategy({ items: [item(0, 1), item(1, 1)], size: 512 })).toHaveLength(2);
    expect(order.stats).toEqual({ steps: 2, sequences: 4, tokens: 4, waitTurns: 1, microBatches: 2 });
  });

  it("does not wait for a sequence whose request is over, nor for new ones", () => {
    const order = new BatchOrder();
    order.strategy({ items: [item(0, 1), item(1, 1)], size: 512 });
    order.leave(sequenceTag(1));
    expect(order.strategy({ items: [item(0, 1)], size: 512 })).toHaveLength(1);
    expect(order.strategy({ items: [item(0, 1), item(2, 30)], size: 512 })).toHaveLength(2);
  });

  it("waits a bounded number of turns, then decodes what is there", () => {
    const order = new BatchOrder();
    order.strategy({ items: [item(0, 1), item(1, 1)], size: 512 });
    for (let i = 0; i < MAX_WAIT_TURNS; i++) expect(order.strategy({ items: [item(0, 1)], size: 512 })).toEqual([]);
    expect(order.strategy({ items: [item(0, 1)], size: 512 })).toHaveLength(1);
  });

  it("decodes an interactive prompt waiting for its first token in a step of its own, at once, then with the rest", () => {
    const order = new BatchOrder(undefined, 4);
    order.strategy({ items: [item(0, 1), item(1, 1), item(2, 1)], size: 512 });
    order.urge(sequenceTag(3), true);
    // Sequence 1 of the last step has not queued its token yet: the prompt does not wait for it, nor share its step.
    const items = [item(0, 1), item(3, 80), item(2, 1)];
    expect(shape(items, order.strategy({ items, size: 512 }))).toEqual([[1, 80]]);
    expect(order.urgentSteps).toBe(1);
    // Its first token came: it is one sequence of the batch's steps again.
    order.urge(sequenceTag(3), false);
    expect(order.strategy({ items: [item(0, 1), item(1, 1), item(2, 1), item(3, 1)], size: 512 })).toHaveLength(4);
    order.urge(sequenceTag(2), true);
    order.leave(sequenceTag(2));
    expect(order.strategy({ items: [item(0, 1), item(1, 1), item(2, 1), item(3, 1)], size: 512 })).toHaveLength(4);
  });

  it("falls back to plain ordering, never waiting, once an item carries a tag it never gave", () => {
    const order = new BatchOrder(undefined, 2);
    order.strategy({ items: [item(0, 1), item(1, 1)], size: 512 });
    expect(order.untagged).toBe(false);
    // As if node-llama-cpp clamped the priority to its declared 1-5: sequence 1 would be waited for in vain.
    const clamped = { ...item(0, 1), evaluationPriority: 5 as BatchItem["evaluationPriority"] };
    expect(order.strategy({ items: [clamped], size: 512 })).toHaveLength(1);
    expect(order.untagged).toBe(true);
    // Two items with one tag (a clamp that stays in range) say the same.
    const twice = new BatchOrder(undefined, 8);
    twice.strategy({ items: [item(4, 1), { ...item(6, 1), evaluationPriority: sequenceTag(4) }], size: 512 });
    expect(twice.untagged).toBe(true);
  });

  it("tags are positive and follow the sequence index", () => {
    expect(sequenceTag(0)).toBeGreaterThan(0);
    expect(sequenceTag(5)).toBeGreaterThan(sequenceTag(4));
  });
});

describe("BatchOrder step size", () => {
  it("reports the tokens of each planned step, and nothing for a turn spent waiting", () => {
    const sizes: number[] = [];
    const order = new BatchOrder((tokens) => sizes.push(tokens));
    order.strategy({ items: [item(0, 12), item(1, 1)], size: 512 });
    order.strategy({ items: [item(0, 1)], size: 512 });
    order.strategy({ items: [item(0, 1), item(1, 1)], size: 512 });
    expect(sizes).toEqual([13, 2]);
  });
});

describe("node-llama-cpp's side of the tag contract", () => {
  it("hands every sequence's evaluationPriority to the strategy unchanged, past its declared 1-5", async () => {
    const { loadLlama, loadModel } = await import("../../engine/load/load.js");
    const { SequencePool } = await import("../../engine/pool/sequence-pool.js");
    const { generate } = await import("../../engine/generate/generate.js");
    const { tokenizePrompt } = await import("../../engine/generate/tokens.js");
    const { testModelPath } = await import("../../testkit/model.js");
    const { PLAIN } = await import("./plain-request.js");
    const llama = await loadLlama(false, () => {});
    const model = await loadModel(llama, await testModelPath(), () => {});
    const pool = await SequencePool.create(model, {
      sequences: 8,
      auto: false,
      contextSize: 64,
      threads: 1,
      flashAttention: false,
      log: () => {},
    });
    try {
      // Short in every tokenizer (a byte-level one too), so the 8 prompts fit one batch and each step holds all 8.
      const tokens = tokenizePrompt(model, "Once");
      const req = {
        tokens,
        maxTokens: 4,
        temperature: 0,
        topP: 1,
        topK: 0,
        seed: 1,
        stopStrings: [],
        stopTokens: new Set<Token>(),
        ...PLAIN,
      };
      await Promise.all(Array.from({ length: 8 }, () => generate({ pool, model, req, borrower: BATCH_WORK })));
      // Every item carried a tag 1-8 (else the order would have marked itself untagged), and steps held all 8.
      const order = (pool as unknown as { orders: BatchOrder[] }).orders[0];
      expect(order.untagged).toBe(false);
      expect(pool.batchStats.sequences / pool.batchStats.steps).toBeGreaterThan(6);
    } finally {
      await pool.close();
      await model.dispose();
      await llama.dispose();
    }
  });
});
