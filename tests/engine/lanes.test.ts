// The interactive lane on the real engine: with every sequence busy and batch lines waiting, a request of the
// interactive lane takes the next sequence freed, ahead of the batch lines that waited longer; and with four
// sequences or more, once the lane is warm, one sequence is kept free for it, so it never waits for a batch line.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/openai-backend.js";
import type { Engine } from "../../engine/types.js";
import type { Lane } from "../../openai/backend.js";
import { parseRequest } from "../../openai/parse.js";
import { openTestEngine } from "../../testkit/model.js";

let engine: Engine;
let backend: LlamaBackend;
let four: Engine;
beforeAll(async () => {
  engine = await openTestEngine({ sequences: 1, contextSize: 256 });
  backend = new LlamaBackend(engine);
  four = await openTestEngine({ sequences: 4, contextSize: 1024 });
});
afterAll(async () => {
  await engine?.close();
  await four?.close();
});

function runner(b: LlamaBackend, finished: string[]) {
  return (name: string, lane: Lane, maxTokens: number) => {
    const request = parseRequest("/v1/completions", {
      model: "m",
      prompt: `Once upon a time ${name}`,
      max_tokens: maxTokens,
      temperature: 1,
      seed: 3,
    });
    return b.execute(request, undefined, { lane }).then(() => finished.push(name));
  };
}

describe("lanes", () => {
  it("serve an interactive request on the next free sequence, before batch lines that waited longer", async () => {
    const finished: string[] = [];
    const run = (name: string, lane: Lane, maxTokens: number) => {
      const request = parseRequest("/v1/completions", {
        model: "m",
        prompt: `Once upon a time ${name}`,
        max_tokens: maxTokens,
        temperature: 0,
      });
      return backend.execute(request, undefined, { lane }).then(() => finished.push(name));
    };
    // A batch line holds the one sequence and the others wait for it when the interactive request comes. It runs
    // next, or after the line that took the sequence in the moment it came (a line is a few milliseconds here);
    // the batch lines still waiting then run after it.
    const batch = ["batch 1", "batch 2", "batch 3", "batch 4", "batch 5"].map((name) => run(name, "batch", 100));
    await new Promise((r) => setTimeout(r, 20));
    const interactive = run("interactive", "interactive", 2);
    await Promise.all([...batch, interactive]);
    expect(finished.indexOf("interactive")).toBeLessThanOrEqual(2);
    expect(finished.filter((n) => n !== "interactive")).toEqual(["batch 1", "batch 2", "batch 3", "batch 4", "batch 5"]);
  });

  it("keeps a sequence free for a warm interactive lane: its request runs at once beside a full batch", async () => {
    const finished: string[] = [];
    const run = runner(new LlamaBackend(four), finished);
    await run("warm-up", "interactive", 2);
    // Eight long lines for the four sequences: without the reserve, all four run them and the request waits for one to end.
    const batch = Array.from({ length: 8 }, (_, i) => run(`batch ${i}`, "batch", 200));
    await new Promise((r) => setTimeout(r, 20));
    await run("interactive", "interactive", 2);
    expect(finished).toEqual(["warm-up", "interactive"]);
    await Promise.all(batch);
    expect(finished).toHaveLength(10);
  });
});
