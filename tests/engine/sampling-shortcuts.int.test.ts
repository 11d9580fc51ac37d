// The sampling shortcuts on the real library, on each build there is. The patched addon finds a plain greedy token
// in the logits themselves, without the vocabulary-wide candidate list the sampler chain takes: its answers must be
// the chain's, the most likely token at every position, as log probabilities (which still go through the chain)
// show. Log probabilities of greedy lines and of lines at temperature 1 come from the top logits and their
// normaliser: they must be the whole distribution's, and a sampled line's draws must follow them.
import { afterAll, describe, expect, it } from "vitest";
import { createEngine, type Engine } from "../../engine/index.js";
import { engineBuilds, testModelPath } from "../../testkit/model.js";

const engines: Engine[] = [];
afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
});

const PROMPTS = [
  "Once upon a time there was a little girl named Lily. She",
  "The dog ran to the park and",
  "Tom had a red ball. One day",
  "A",
];

describe.each(await engineBuilds())("sampling on the %s build", (build) => {
  it("each token is the most likely one, with or without log probabilities asked for", async () => {
    // One sequence and one thread: each answer is evaluated alone, so both runs see the same logits.
    const engine = await createEngine({
      modelPath: await testModelPath(),
      generatedModel: false,
      gpu: false,
      threads: 1,
      sequences: 1,
      contexts: 1,
      contextSize: 512,
      embeddingContexts: 1,
      prefixReuse: false,
      build,
    });
    engines.push(engine);
    for (const prompt of PROMPTS) {
      const plain = await engine.complete(prompt, { temperature: 0, maxTokens: 24, seed: 1 });
      const traced = await engine.complete(prompt, { temperature: 0, maxTokens: 24, seed: 2, logprobs: 3 });
      expect(plain.text).toBe(traced.text);
      expect(plain.completionTokens).toBe(traced.completionTokens);
      const steps = traced.logprobs ?? [];
      expect(steps.length).toBe(traced.completionTokens);
      for (const step of steps) {
        expect(step.top[0].logprob).toBeCloseTo(step.logprob, 5);
      }
    }
  });

  it("a greedy line's log probabilities, taken from the top logits, are those of the whole distribution", async () => {
    const engine = engines.at(-1)!;
    for (const prompt of PROMPTS) {
      // The first position's distribution depends on the prompt alone: a sampled line (temperature 1, which reads
      // the whole distribution) sees the same one there.
      const greedy = await engine.complete(prompt, { temperature: 0, maxTokens: 6, logprobs: 5 });
      const sampled = await engine.complete(prompt, { temperature: 1, maxTokens: 1, seed: 3, logprobs: 5 });
      const [first] = greedy.logprobs!;
      expect(first.top.map((t) => t.token)).toEqual(sampled.logprobs![0].top.map((t) => t.token));
      for (const [i, t] of first.top.entries()) expect(t.logprob).toBeCloseTo(sampled.logprobs![0].top[i].logprob, 4);
      for (const step of greedy.logprobs!) {
        expect(step.top).toHaveLength(5);
        expect(step.top[0]).toEqual({ token: step.token, logprob: step.logprob, bytes: step.bytes });
        for (let i = 1; i < 5; i++) expect(step.top[i].logprob).toBeLessThanOrEqual(step.top[i - 1].logprob);
        expect(step.top.reduce((sum, t) => sum + Math.exp(t.logprob), 0)).toBeLessThanOrEqual(1 + 1e-9);
      }
      const one = await engine.complete(prompt, { temperature: 0, maxTokens: 6, logprobs: 1 });
      expect(one.text).toBe(greedy.text);
      one.logprobs!.forEach((step, i) => {
        expect(step.top.map((t) => t.token)).toEqual([greedy.logprobs![i].token]);
        expect(step.top[0].logprob).toBeCloseTo(greedy.logprobs![i].logprob, 5);
        expect(step.logprob).toBeCloseTo(greedy.logprobs![i].logprob, 5);
      });
    }
  });

  it("a sampled line's log probabilities are the whole distribution's too, and its draws follow them", async () => {
    const engine = engines.at(-1)!;
    const prompt = PROMPTS[0];
    const greedy = await engine.complete(prompt, { temperature: 0, maxTokens: 1, logprobs: 5 });
    const at = (seed: number) => engine.complete(prompt, { temperature: 1, maxTokens: 12, seed, logprobs: 5 });
    const line = await at(11);
    expect(await at(11)).toEqual(line);
    const [first] = line.logprobs!;
    expect(first.top.map((t) => t.token)).toEqual(greedy.logprobs![0].top.map((t) => t.token));
    for (const [i, t] of first.top.entries()) expect(t.logprob).toBeCloseTo(greedy.logprobs![0].top[i].logprob, 4);
    for (const step of line.logprobs!) {
      expect(step.logprob).toBeLessThanOrEqual(step.top[0].logprob);
      // Listed among the alternatives, it has its own log probability there (byte tokens of a character cut in two
      // all read as U+FFFD, so those are told apart by nothing shown).
      const listed = step.token.includes("\uFFFD") ? undefined : step.top.find((t) => t.token === step.token);
      if (listed) expect(listed.logprob).toBeCloseTo(step.logprob, 9);
    }
    // Draws over many seeds: the most likely first token comes up about as often as its probability says.
    const p = Math.exp(first.top[0].logprob);
    const n = 48;
    const firsts = await Promise.all(
      Array.from({ length: n }, (_, seed) => engine.complete(prompt, { temperature: 1, maxTokens: 1, seed, logprobs: 1 })),
    );
    const hits = firsts.filter((r) => r.logprobs![0].token === first.top[0].token).length;
    expect(new Set(firsts.map((r) => r.text)).size).toBeGreaterThan(1);
    expect(Math.abs(hits - n * p)).toBeLessThanOrEqual(5 * Math.sqrt(n * p * (1 - p)) + 1);
    for (const r of firsts) expect(r.logprobs![0].logprob).toBeLessThanOrEqual(first.top[0].logprob + 1e-9);
  });

  it("top_p 0 is greedy too, and a bias still moves the answer", async () => {
    const engine = engines.at(-1)!;
    const prompt = PROMPTS[1];
    const greedy = await engine.complete(prompt, { temperature: 0, maxTokens: 8 });
    expect((await engine.complete(prompt, { temperature: 1, topP: 0, maxTokens: 8, seed: 9 })).text).toBe(greedy.text);
    // A bias goes through the chain (the sampler that applies it), never the shortcut: a token pushed up is taken.
    const pushed = Math.min(300, engine.vocabularySize - 1);
    const biased = await engine.complete(prompt, { temperature: 0, maxTokens: 8, logitBias: new Map([[pushed, 100]]) });
    expect(biased.text).not.toBe(greedy.text);
    const again = await engine.complete(prompt, { temperature: 0, maxTokens: 8, logitBias: new Map([[pushed, 100]]), logprobs: 1 });
    expect(biased.text).toBe(again.text);
  });
});
