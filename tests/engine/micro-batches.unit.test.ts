// The model of how llama.cpp cuts a decode into passes over the weights (engine/pool/micro-batches.ts).
import { describe, expect, it } from "vitest";
import { microBatches, type StepPart } from "../../engine/pool/micro-batches.js";

const gens = (ids: number[]): StepPart[] => ids.map((sequence) => ({ sequence, tokens: 1 }));
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

describe("microBatches, a KV stream per sequence", () => {
  it("decodes one token of every consecutive sequence in one pass", () => {
    expect(microBatches(gens(range(0, 32)), 512, false)).toBe(1);
  });

  it("starts a new pass at every gap in the sequence ids", () => {
    expect(microBatches(gens([0, 1, 2, 5, 6, 9]), 512, false)).toBe(3);
  });

  it("takes a prompt tail beside generating sequences in a pass of its own", () => {
    const parts = gens(range(0, 32));
    parts[17] = { sequence: 17, tokens: 26 };
    expect(microBatches(parts, 512, false)).toBe(2);
  });

  it("takes tails on sequences apart from each other one pass each", () => {
    const parts = gens(range(0, 32));
    for (const s of [3, 10, 25]) parts[s] = { sequence: s, tokens: 27 };
    expect(microBatches(parts, 512, false)).toBe(4);
  });

  it("takes equal tails on consecutive sequences together, and unequal ones level by level", () => {
    const equal = [3, 4, 5].map((sequence) => ({ sequence, tokens: 20 }));
    expect(microBatches(equal, 512, false)).toBe(1);
    const unequal = [
      { sequence: 3, tokens: 20 },
      { sequence: 4, tokens: 25 },
      { sequence: 5, tokens: 22 },
    ];
    // 20 of each; then 2 of 4 and 5; then 3 of 4.
    expect(microBatches(unequal, 512, false)).toBe(3);
  });

  it("keeps each pass within the micro-batch size, evenly over its sequences", () => {
    // 32 prompts of 400 tokens: 16 tokens of each per pass of 512.
    expect(
      microBatches(
        range(0, 32).map((sequence) => ({ sequence, tokens: 400 })),
        512,
        false,
      ),
    ).toBe(25);
    expect(microBatches([{ sequence: 0, tokens: 1200 }], 512, false)).toBe(3);
  });

  it("finds a following id later in the batch, as llama.cpp does", () => {
    expect(microBatches(gens([3, 5, 4]), 512, false)).toBe(2);
  });

  it("makes no pass of an empty step", () => {
    expect(microBatches([], 512, false)).toBe(0);
    expect(microBatches([{ sequence: 0, tokens: 0 }], 512, true)).toBe(0);
  });
});

describe("microBatches, one KV stream for all", () => {
  it("cuts by size only", () => {
    const parts = gens(range(0, 32));
    for (const s of [3, 10, 25]) parts[s] = { sequence: s, tokens: 27 };
    expect(microBatches(parts, 512, true)).toBe(1);
    expect(microBatches([{ sequence: 0, tokens: 1200 }], 512, true)).toBe(3);
  });
});
