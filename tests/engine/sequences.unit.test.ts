// The automatic sequence count: the default, halved while the context would not fit its memory share.
import { describe, expect, it } from "vitest";
import { fitSequences } from "../../engine/pool/sequences.js";

const MiB = 2 ** 20;
/** A context of 10 MiB of buffers plus 4 MiB of KV cache per sequence. */
const bytesFor = async (sequences: number) => (10 + 4 * sequences) * MiB;

describe("fitSequences", () => {
  it("keeps the wanted count when it fits", async () => {
    expect(await fitSequences(32, 1024 * MiB, bytesFor)).toBe(32);
  });

  it("halves until the context fits the budget", async () => {
    expect(await fitSequences(32, 80 * MiB, bytesFor)).toBe(16);
    expect(await fitSequences(32, 30 * MiB, bytesFor)).toBe(4);
  });

  it("never goes below one sequence", async () => {
    expect(await fitSequences(32, 1 * MiB, bytesFor)).toBe(1);
    expect(await fitSequences(0, 1024 * MiB, bytesFor)).toBe(1);
  });
});
