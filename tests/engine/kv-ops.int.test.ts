// The patched build's queued KV changes (engine/pool/kv-ops.ts) on the real library: copies and truncations give the
// answers a fresh evaluation gives, with and without a unified KV cache, and a copy does not wait for sequences
// that are generating. Skipped with a note where the patched build is not there (npm run build:engine).
import { afterAll, describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import { createEngine, type Engine } from "../../engine/index.js";
import { canQueueKvOps } from "../../engine/pool/kv-ops.js";
import { runBatchFile } from "../../pipeline/run-batch.js";
import { engineBuilds, NO_PATCHED_BUILD, testModelPath } from "../../testkit/model.js";
import { jsonl, scratchDir } from "../helpers/scratch.js";

const patched = (await engineBuilds()).includes("patched");
if (!patched) console.warn(NO_PATCHED_BUILD);

const engines: Engine[] = [];
const scratch = scratchDir("kv-auto");
async function make(opts: { sequences: number; prefixCopy?: boolean; prefixReuse?: boolean; kvUnified?: boolean | "auto" }) {
  const engine = await createEngine({
    modelPath: await testModelPath(),
    generatedModel: false,
    gpu: false,
    threads: 1,
    contexts: 1,
    contextSize: 1024,
    embeddingContexts: 1,
    build: "patched",
    ...opts,
  });
  engines.push(engine);
  return engine;
}
afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
});

const PREFIX = `The rules of the game. ${"A child, a dog and a red ball play in the park every day. ".repeat(12)}Now:`;
const greedy = { temperature: 0, maxTokens: 6 };
const family = (n: number) => Array.from({ length: n }, (_, i) => `${PREFIX} ${["Lily", "Tom", "Ben", "Sue"][i % 4]} saw ${i} birds and`);

it("a sequence is fit for queued changes only on the patched addon, without predictor or checkpoints", () => {
  const sequence = (ctx: object, extra: object = {}) =>
    ({
      _sequenceId: 0,
      _contextTokens: [],
      _nextTokenIndex: 0,
      _loadedTokenPredictions: [],
      _context: { _ctx: ctx },
      needsCheckpoints: false,
      ...extra,
    }) as never;
  const ops = { queueSequenceCopy: () => {}, queueSequenceRemove: () => {} };
  expect(canQueueKvOps(sequence(ops))).toBe(true);
  expect(canQueueKvOps(sequence({ queueSequenceCopy: () => {} }))).toBe(false);
  expect(canQueueKvOps(sequence({}))).toBe(false);
  expect(canQueueKvOps(sequence(ops, { needsCheckpoints: true }))).toBe(false);
  expect(canQueueKvOps(sequence(ops, { _tokenPredictor: {} }))).toBe(false);
});

describe.skipIf(!patched)("queued KV changes on the patched build", () => {
  it("copied prefixes answer as evaluated ones, with one KV stream per sequence and with a unified cache", async () => {
    const texts = family(8);
    const plain = await make({ sequences: 4, prefixCopy: false });
    const expected = await Promise.all(texts.map((t) => plain.complete(t, greedy)));
    for (const kvUnified of [false, true]) {
      const engine = await make({ sequences: 4, kvUnified });
      expect(engine.info.kvUnified).toBe(kvUnified);
      const before = engine.scheduling().prefixCopies;
      const got = await Promise.all(texts.map((t) => engine.complete(t, greedy)));
      expect(engine.scheduling().prefixCopies - before).toBeGreaterThanOrEqual(3);
      expect(got.map((r) => r.text)).toEqual(expected.map((r) => r.text));
      expect(got.filter((r) => r.cachedPromptTokens > 0).length).toBeGreaterThanOrEqual(7);
    }
  });

  it("a sequence reused for a prompt sharing part of its cache drops the rest and answers as a fresh one", async () => {
    const one = await make({ sequences: 1 });
    const first = `${PREFIX} Lily found a shell and`;
    const second = `${PREFIX} Tom lost his hat and`;
    await one.complete(first, greedy);
    const reused = await one.complete(second, greedy);
    expect(reused.cachedPromptTokens).toBeGreaterThan(one.countTokens(PREFIX) - 4);
    const fresh = await make({ sequences: 1, prefixReuse: false });
    const alone = await fresh.complete(second, greedy);
    expect(reused.text).toBe(alone.text);
    // The first prompt again: its tail was dropped from the cache, so it is evaluated again and still answers the same.
    const again = await one.complete(first, greedy);
    expect(again.text).toBe((await fresh.complete(first, greedy)).text);
  });

  it("a family member arriving while its siblings generate copies their prefix without waiting for them to finish", async () => {
    const engine = await make({ sequences: 4 });
    const [head, ...rest] = family(4);
    const long = { temperature: 0, maxTokens: 200 };
    const finished: Array<{ who: "long" | "short"; tokens: number; cached: number; at: number }> = [];
    const note = (who: "long" | "short") => (r: { completionTokens: number; cachedPromptTokens: number }) =>
      finished.push({ who, tokens: r.completionTokens, cached: r.cachedPromptTokens, at: performance.now() });
    const runs = [engine.complete(head, long).then(note("long"))];
    runs.push(...rest.slice(0, 2).map((t) => engine.complete(t, long).then(note("long"))));
    // Arrives once the others are generating: their prompts evaluated and a few tokens out (watched, not timed, so
    // a fast model cannot finish them first).
    const prompt = engine.countTokens(PREFIX);
    while (engine.scheduling().evaluatedTokens < prompt + 3 * 8) await new Promise((r) => setTimeout(r, 2));
    const arrived = performance.now();
    runs.push(engine.complete(rest[2], { temperature: 0, maxTokens: 2 }).then(note("short")));
    await Promise.all(runs);
    const short = finished.find((f) => f.who === "short")!;
    expect(short.cached).toBeGreaterThan(prompt - 4);
    // Before any sibling still generating when it came and generating for long (a model may end a story early).
    const ranOn = finished.filter((f) => f.who === "long" && f.tokens >= 100 && f.at > arrived);
    expect(ranOn.length).toBeGreaterThan(0);
    for (const f of ranOn) expect(short.at).toBeLessThan(f.at);
  });

  it("a unified cache churned by lines of every length answers each line as streams of their own do", async () => {
    // More lines than sequences, of different prompt and answer lengths, so lines end and start throughout and the
    // cache's blocks are freed and taken again in every order.
    const lines = Array.from({ length: 20 }, (_, i) => ({
      text: `${"A child and a dog play in the park. ".repeat(1 + ((i * 7) % 13))}Then ${["Lily", "Tom", "Ben"][i % 3]}`,
      opts: { temperature: 0, maxTokens: 4 + ((i * 11) % 40) },
    }));
    const answers = async (kvUnified: boolean) => {
      const engine = await make({ sequences: 4, kvUnified, prefixCopy: false });
      return (await Promise.all(lines.map((l) => engine.complete(l.text, l.opts)))).map((r) => r.text);
    };
    const streams = await answers(false);
    expect(new Set(streams).size).toBeGreaterThan(10);
    expect(await answers(true)).toEqual(streams);
  });

  it("KV_UNIFIED auto: a run of prefix families gets a unified cache, a run of lines apart streams, answers unchanged", async () => {
    const line = (prompt: string, i: number) => ({ custom_id: `l${i}`, method: "POST", url: "/v1/completions", body: { prompt, ...wire } });
    const wire = { temperature: 0, max_tokens: 6 };
    const runs = {
      families: family(10).map(line),
      apart: Array.from({ length: 10 }, (_, i) => line(`Story ${i}: ${"Tom and a cat. ".repeat(1 + i)}The ${i} friends`, i)),
    };
    const run = async (engine: Engine, name: keyof typeof runs) => {
      const out = await scratch.file(`${name}-${engine.info.kvUnified}.jsonl`);
      const inputPath = await scratch.write(jsonl(runs[name]), `${name}.jsonl`);
      const backend = new LlamaBackend(engine);
      const result = await runBatchFile({
        inputPath,
        outputPath: out,
        errorPath: `${out}.err`,
        endpoint: "/v1/completions",
        backend,
        batchSize: 4,
        concurrency: 8,
      });
      expect(result.completed).toBe(10);
      const texts = new Map<string, string>();
      for (const l of (await import("node:fs")).readFileSync(out, "utf8").trim().split("\n")) {
        const o = JSON.parse(l);
        texts.set(o.custom_id, o.response.body.choices[0].text);
      }
      return texts;
    };
    const streams = await make({ sequences: 4, kvUnified: false });
    const auto = await make({ sequences: 4, kvUnified: "auto" });
    expect(auto.info.kvUnified).toBe("auto");
    expect(auto.scheduling()).toMatchObject({ kvUnified: false, kvSwitches: 0 });
    expect(await run(auto, "families")).toEqual(await run(streams, "families"));
    expect(auto.scheduling()).toMatchObject({ kvUnified: true, kvSwitches: 1 });
    expect(await run(auto, "apart")).toEqual(await run(streams, "apart"));
    expect(auto.scheduling()).toMatchObject({ kvUnified: false, kvSwitches: 2 });
    expect(streams.scheduling().kvSwitches).toBe(0);
  });
});
