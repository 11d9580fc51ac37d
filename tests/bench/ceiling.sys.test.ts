// The families rows' ceiling: a workload's shape read with the model's own tokenizer, and llama-batched-bench run on
// it, its result row read back. Skipped where the tool is not built (bash scripts/build-llama-server.sh --batched-bench).
import { describe, expect, it } from "vitest";
import { batchedBenchBinary, familyShape, kernelCeiling } from "../../bench/ceiling.js";
import { familiesWorkload } from "../../bench/scheduling-workloads.js";
import { testModelPath } from "../../testkit/model.js";

const binary = batchedBenchBinary(() => {}, true);
if (!binary)
  console.warn(
    "tests/bench/ceiling.sys.test.ts: skipped: llama-batched-bench is not built (bash scripts/build-llama-server.sh --batched-bench)",
  );

describe("the kernels' ceiling of a families workload", () => {
  it("counts families, shared and tail tokens with the model's tokenizer", async () => {
    const w = familiesWorkload(24, 3, 3, 5);
    const shape = await familyShape(await testModelPath(), w);
    expect(shape).toMatchObject({ families: 3, lines: 8, maxTokens: 5 });
    // Each preamble is ~400 tokens of words; a line's own item is 10-29 tokens of words and its question.
    expect(shape.shared).toBeGreaterThan(200);
    expect(shape.tails / 24).toBeGreaterThan(5);
    expect(shape.tails / 24).toBeLessThan(shape.shared);
  });

  it.skipIf(!binary)("runs one family in llama-batched-bench and adds the tails at its prompt speed", async () => {
    const shape = { families: 3, lines: 8, shared: 64, tails: 300, maxTokens: 5 };
    const c = kernelCeiling(binary!, await testModelPath(), shape, 1);
    expect(c.familySeconds).toBeGreaterThan(0);
    expect(c.promptPerSecond).toBeGreaterThan(0);
    expect(c.seconds).toBeCloseTo(3 * c.familySeconds + 300 / c.promptPerSecond, 6);
  });
});
