// A batch line's sequence made ready beside lines generating on the same context, on the real engine and either
// build: a short line's sequence goes to the line waiting, whose cut of the cache (node-llama-cpp's context lock on
// the prebuilt build, paused for; queued into the next decode on the patched one) does not wait for the long lines
// to end. While it waited, the new line sat idle until the context's lines had all ended.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../../engine/types.js";
import { openTestEngine } from "../../testkit/model.js";

let one: Engine;
beforeAll(async () => {
  one = await openTestEngine({ sequences: 4, contextSize: 1024, contexts: 1 });
});
afterAll(async () => {
  await one?.close();
});

describe("a cut beside generating lines", () => {
  it("lets the line waiting for a short line's sequence start and end while the long lines still generate", async () => {
    const noEnd = new Map(
      Array.from({ length: one.vocabularySize }, (_, t) => t).flatMap((t) => (one.isEndOfGeneration(t) ? [[t, -100] as const] : [])),
    );
    const ended: string[] = [];
    const line = (name: string, maxTokens: number) =>
      one.complete(`Once upon a time, ${name}`, { temperature: 0, maxTokens, logitBias: noEnd }).then((r) => {
        ended.push(name);
        return r;
      });
    const lines = [
      ...["long 0", "long 1", "long 2"].map((n) => line(n, 300)),
      line("short", 4),
      // Waits for a sequence: the short line's, whose cache holds another prompt and is cut first.
      line("next", 4),
    ];
    const results = await Promise.all(lines);
    expect(ended.slice(0, 2)).toEqual(["short", "next"]);
    expect(results.map((r) => r.completionTokens)).toEqual([300, 300, 300, 4, 4]);
  });
});
