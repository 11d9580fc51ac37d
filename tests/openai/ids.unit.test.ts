// Ids are drawn from a pool of random bytes refilled as it runs out: each is as long as asked, and none repeats
// across refills.
import { describe, expect, it } from "vitest";
import { hexId } from "../../openai/ids.js";

describe("hexId", () => {
  it("gives distinct hex ids of the length asked, across the pool's refills and beyond its size", () => {
    const ids = Array.from({ length: 5_000 }, (_, i) => hexId(1 + (i % 24)));
    for (const [i, id] of ids.entries()) expect(id).toMatch(new RegExp(`^[0-9a-f]{${2 * (1 + (i % 24))}}$`));
    const long = ids.filter((id) => id.length >= 16);
    expect(new Set(long).size).toBe(long.length);
    expect(hexId(5_000)).toMatch(/^[0-9a-f]{10000}$/);
    expect(hexId()).toHaveLength(24);
  });
});
