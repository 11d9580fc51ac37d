// The interactive lane on the real engine: with every sequence busy and batch lines waiting, a request of the
// interactive lane takes the next sequence freed, ahead of the batch lines that waited longer; and with four
// sequences or more, once the lane is warm, one sequence is kept free for it, so it never waits for a batch line, and
// the one kept is the one the lane gave back last, which holds its last prompt;
// past that, a batch line gives its sequence up at its next token and resumes after, keeping what it generated, while
// the batch keeps its floor of sequences. On
// either build the cut of the lane's cache comes within about a decode beside generating batch lines.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import type { Borrower, Engine } from "../../engine/types.js";
import type { Lane } from "../../openai/backend.js";
import { parseRequest } from "../../openai/parse.js";
import { openTestEngine } from "../../testkit/model.js";

let engine: Engine;
let backend: LlamaBackend;
let four: Engine;
let two: Engine;
beforeAll(async () => {
  engine = await openTestEngine({ sequences: 1, contextSize: 256 });
  backend = new LlamaBackend(engine);
  four = await openTestEngine({ sequences: 4, contextSize: 1024 });
  two = await openTestEngine({ sequences: 2, contextSize: 512 });
});
afterAll(async () => {
  await engine?.close();
  await four?.close();
  await two?.close();
});

/** Bans the model's end tokens: an answer runs its whole maxTokens. */
/** A synchronous request of the default service tier, as the adapter passes it to the engine. */
const INTERACTIVE: Borrower = { lane: "interactive" };

const noEnd = (e: Engine) =>
  new Map(Array.from({ length: e.vocabularySize }, (_, t) => t).flatMap((t) => (e.isEndOfGeneration(t) ? [[t, -100] as const] : [])));

/** Batch lines begun on every sequence of `e`, each streaming its text; resolves once each has streamed some. */
async function busy(e: Engine, lines: Array<Omit<Parameters<Engine["complete"]>[1], "onText">>) {
  const streamed = lines.map(() => "");
  const finished: string[] = [];
  let generating = () => {};
  const all = new Promise<void>((r) => {
    generating = r;
  });
  const results = lines.map((params, i) =>
    e
      .complete(`Once upon a time, line ${i}`, {
        ...params,
        onText: (_, text) => {
          streamed[i] += text;
          if (streamed.every((s) => s.length > 0)) generating();
        },
      })
      .then((r) => {
        finished.push(`batch ${i}`);
        return r;
      }),
  );
  await all;
  return { streamed, finished, results: Promise.all(results) };
}

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

  it("keeps the lane's last prompt in its reserve: the next request of its family beside a full batch evaluates only its tail", async () => {
    const family = `${"The little dog ran across the green field to find his red ball. ".repeat(4)}Then`;
    const ask = (tail: string) => four.complete(`${family} ${tail}`, { temperature: 0, maxTokens: 2 }, undefined, INTERACTIVE);
    const first = await ask("the cat sat.");
    // Eight long lines for four sequences: the three the reserve leaves run batch lines, and eight more wait.
    const { results } = await busy(
      four,
      Array.from({ length: 3 }, () => ({ temperature: 0, maxTokens: 120, logitBias: noEnd(four) })),
    );
    const waiting = Array.from({ length: 8 }, (_, i) => four.complete(`Once upon a time, waiting ${i}`, { temperature: 0, maxTokens: 40 }));
    const second = await ask("the bird sang.");
    // The family's prompt was evaluated once: the second request found all of it but its own tail cached.
    expect(first.cachedPromptTokens).toBeLessThan(first.promptTokens * 0.1);
    expect(second.cachedPromptTokens).toBeGreaterThan(first.promptTokens * 0.8);
    await Promise.all([results, ...waiting]);
  });

  it("cuts the lane's cache beside a generating batch at once, on either build: the batch pauses for it, not it for the batch", async () => {
    // One context, so the batch lines generate on the context whose lock the cut takes on the prebuilt build.
    const one = await openTestEngine({ sequences: 4, contextSize: 1024, contexts: 1 });
    try {
      const family = `${"The little dog ran across the green field to find his red ball. ".repeat(4)}Then`;
      await one.complete(`${family} the cat sat.`, { temperature: 0, maxTokens: 2 }, undefined, INTERACTIVE);
      let batchTokens = 0;
      const lines = Array.from({ length: 3 }, (_, i) =>
        one.complete(
          `Once upon a time, line ${i}`,
          { temperature: 0, maxTokens: 300, logitBias: noEnd(one), onText: () => batchTokens++ },
          undefined,
        ),
      );
      while (batchTokens < 30) await new Promise((r) => setTimeout(r, 5));
      const before = batchTokens;
      let during = -1;
      const second = await one.complete(
        `${family} the bird sang.`,
        {
          temperature: 0,
          maxTokens: 2,
          onText: () => {
            if (during < 0) during = batchTokens - before;
          },
        },
        undefined,
        INTERACTIVE,
      );
      // Its cache was cut to the family's prompt (the lock taken), and the three lines made a few tokens meanwhile:
      // waiting for them to pause of themselves took seconds, hundreds of their tokens.
      expect(second.cachedPromptTokens).toBeGreaterThan(second.promptTokens * 0.8);
      expect(during).toBeGreaterThanOrEqual(0);
      expect(during).toBeLessThan(3 * 8);
      await Promise.all(lines);
    } finally {
      await one.close();
    }
  });

  it("has a batch line give its sequence to an interactive request at its next token; the line keeps every token", async () => {
    // Two sequences keep no reserve: both run batch lines when the request comes, and without preemption it would
    // wait for one to end (190 tokens on).
    const { streamed, finished, results } = await busy(
      two,
      [0, 1].map(() => ({ temperature: 0, maxTokens: 200, logitBias: noEnd(two) })),
    );
    const before = two.scheduling();
    const answer = await two.complete("Once upon a time", { temperature: 0, maxTokens: 4 }, undefined, INTERACTIVE);
    finished.push("interactive");
    expect(answer.completionTokens).toBe(4);
    const lines = await results;
    expect(finished[0]).toBe("interactive");
    const after = two.scheduling();
    expect(after.preemptions - before.preemptions).toBe(1);
    expect(after.reevaluatedTokens).toBeGreaterThan(before.reevaluatedTokens);
    // What the line streamed before it gave way and after it resumed is its answer, whole and once.
    for (const [i, line] of lines.entries()) {
      expect(line.completionTokens).toBe(200);
      expect(line.finishReason).toBe("length");
      expect(line.text).toBe(streamed[i]);
    }
  });

  it("leaves the batch its floor of sequences: of two requests beside two lines, one takes a line's sequence, the other waits", async () => {
    // Two sequences keep one for batch work while its lines wait (the line that gave way is one): without that floor
    // both lines gave their sequences to the two requests and the batch made no token until one ended.
    const { streamed, results } = await busy(
      two,
      [0, 1].map(() => ({ temperature: 0, maxTokens: 200, logitBias: noEnd(two) })),
    );
    const before = two.scheduling().preemptions;
    const batchChars = () => streamed.reduce((n, text) => n + text.length, 0);
    const atStart = batchChars();
    const ask = () => two.complete("Once upon a time", { temperature: 0, maxTokens: 30, logitBias: noEnd(two) }, undefined, INTERACTIVE);
    const requests = [ask(), ask()];
    const first = await Promise.race(requests);
    const grown = batchChars() - atStart;
    const answers = await Promise.all(requests);
    const lines = await results;
    expect(two.scheduling().preemptions - before).toBe(1);
    expect(first.completionTokens).toBe(30);
    expect(grown).toBeGreaterThanOrEqual(20);
    expect(answers.map((a) => a.completionTokens)).toEqual([30, 30]);
    for (const [i, line] of lines.entries()) {
      expect(line.completionTokens).toBe(200);
      expect(line.text).toBe(streamed[i]);
    }
  });

  it("resumes a line under a grammar where the grammar stopped, and a sampled line to its whole length", async () => {
    const schema = { type: "array", items: { enum: ["cat", "dog"] }, minItems: 40, maxItems: 40 };
    const lines = [
      { temperature: 1, seed: 5, maxTokens: 400, format: { type: "json_schema" as const, schema } },
      { temperature: 1, seed: 5, maxTokens: 120, logitBias: noEnd(two) },
    ];
    const { streamed, results } = await busy(two, lines);
    const before = two.scheduling().preemptions;
    await two.complete("Once upon a time", { temperature: 0, maxTokens: 2 }, undefined, INTERACTIVE);
    const [json, sampled] = await results;
    expect(two.scheduling().preemptions - before).toBe(1);
    const items = JSON.parse(json.text) as unknown[];
    expect(items).toHaveLength(40);
    expect(items.every((x) => x === "cat" || x === "dog")).toBe(true);
    expect(sampled.completionTokens).toBe(120);
    expect([json.text, sampled.text]).toEqual(streamed);
  });
});
