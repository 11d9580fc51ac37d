// The result cache over the real engine on the generated model, as a batch runs it: repeated greedy lines computed
// once, each line its own answer; a sampled pair computed twice; an answer read back after the store is reopened;
// embeddings collapsed; a batch with metadata.cache "off" computing everything.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CacheOutcome, CachingBackend, withCacheOptions } from "../../cache/caching-backend.js";
import { LmdbResultCache } from "../../cache/lmdb-cache.js";
import { fileDigest, localIdentity } from "../../cache/model-identity.js";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import type { Engine } from "../../engine/types.js";
import type { Endpoint, InferenceBackend } from "../../openai/backend.js";
import { runBatchFile } from "../../pipeline/run-batch.js";
import type { RunBatchOptions } from "../../pipeline/types.js";
import { openGeneratedEngine } from "../../testkit/model.js";

const root = mkdtempSync(path.join(tmpdir(), "obi-cache-engine-"));
let engine: Engine;
let llama: LlamaBackend;
let identity: string;
const limits = { maxBytes: 1 << 26, ttlSeconds: 0 };

beforeAll(async () => {
  engine = await openGeneratedEngine(4);
  llama = new LlamaBackend(engine, "generated");
  const digest = await fileDigest(await ensureGeneratedModel(), path.join(root, "digests.json"));
  identity = localIdentity(digest, { nodeLlamaCpp: "3.22.1", build: engine.info.build, patchKey: null, settings: {} });
}, 120_000);
afterAll(async () => {
  await engine?.close();
  rmSync(root, { recursive: true, force: true });
});

/** A batch over `backend`: its lines' answers by custom_id, in the output file. */
async function runBatch(
  name: string,
  endpoint: Endpoint,
  bodies: object[],
  backend: InferenceBackend,
  extra: Partial<RunBatchOptions> = {},
) {
  const dir = path.join(root, name);
  const input = path.join(`${dir}-input.jsonl`);
  writeFileSync(input, bodies.map((body, i) => JSON.stringify({ custom_id: `r${i}`, method: "POST", url: endpoint, body })).join("\n"));
  const result = await runBatchFile({
    inputPath: input,
    outputPath: `${dir}-output.jsonl`,
    errorPath: `${dir}-errors.jsonl`,
    endpoint,
    backend,
    batchSize: 8,
    concurrency: 8,
    ...extra,
  });
  const lines = readFileSync(`${dir}-output.jsonl`, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  return { result, byId: new Map(lines.map((l) => [l.custom_id as string, l.response.body as Record<string, any>])) };
}

function cachingOver(cache: LmdbResultCache) {
  const outcomes: CacheOutcome[] = [];
  const backend = new CachingBackend(llama, { cache, identity, onOutcome: (o) => outcomes.push(o) });
  return { backend, outcomes, count: (o: CacheOutcome) => outcomes.filter((x) => x === o).length };
}

const greedy = (content: string) => ({ model: "m", messages: [{ role: "user", content }], temperature: 0, max_tokens: 12 });

describe("the result cache on the real engine", () => {
  it("computes repeated greedy lines once, each with its own id; a sampled pair twice; a hit after reopening the store", async () => {
    const dir = path.join(root, "store-a");
    const cache = new LmdbResultCache(dir, limits);
    const c = cachingOver(cache);
    const bodies = [
      greedy("Once upon a time"),
      { max_tokens: 12, temperature: 0.0, messages: [{ content: "Once upon a time", role: "user" }], model: "m" },
      greedy("Once upon a time"),
      greedy("The cat sat"),
      { model: "m", messages: [{ role: "user", content: "The dog ran" }], temperature: 1, max_tokens: 12 },
      { model: "m", messages: [{ role: "user", content: "The dog ran" }], temperature: 1, max_tokens: 12 },
    ];
    const first = await runBatch("a", "/v1/chat/completions", bodies, c.backend);
    expect(first.result).toMatchObject({ completed: 6, failed: 0 });
    expect(c.count("computed")).toBe(2);
    expect(c.count("duplicate") + c.count("hit")).toBe(2);
    expect(c.count("bypass")).toBe(2);
    const repeated = ["r0", "r1", "r2"].map((id) => first.byId.get(id)!);
    const text = (b: Record<string, any>) => b.choices[0].message.content;
    expect(new Set(repeated.map(text)).size).toBe(1);
    expect(new Set(repeated.map((b) => b.id)).size).toBe(3);
    for (const b of repeated) expect(b.id).toMatch(/^chatcmpl-/);
    expect((await cache.stats()).entries).toBe(2);
    await cache.close();

    const reopened = new LmdbResultCache(dir, limits);
    const again = cachingOver(reopened);
    const second = await runBatch("b", "/v1/chat/completions", bodies.slice(0, 4), again.backend);
    expect(second.result).toMatchObject({ completed: 4, failed: 0 });
    expect(again.count("computed")).toBe(0);
    expect(again.count("hit")).toBe(4);
    expect(text(second.byId.get("r0")!)).toBe(text(repeated[0]));
    expect(text(second.byId.get("r3")!)).toBe(text(first.byId.get("r3")!));
    // The same counts, its whole prompt reported cached as OpenAI reports a cached prompt.
    const was = first.byId.get("r3")!.usage;
    expect(second.byId.get("r3")!.usage).toEqual({
      ...was,
      prompt_tokens_details: { ...was.prompt_tokens_details, cached_tokens: was.prompt_tokens },
    });
    await reopened.close();
  }, 120_000);

  it("answers remembered lines ahead of the lines computing, wherever they are in the file; a bad body still fails; a cancelled run answers none", async () => {
    const cache = new LmdbResultCache(path.join(root, "store-read"), limits);
    const bodies = [greedy("A lamp in the window"), greedy("A door in the wall")];
    await runBatch("read-1", "/v1/chat/completions", bodies, cachingOver(cache).backend);
    let asked = 0;
    const counting: InferenceBackend = {
      info: llama.info,
      check: (request) => llama.check(request),
      execute: (request, signal, options) => {
        asked++;
        return llama.execute(request, signal, options);
      },
      close: async () => {},
    };
    const backend = new CachingBackend(counting, { cache, identity });
    const bad = { model: "m", messages: "not a list", temperature: 0 };
    // One line at a time, in the file's order: 80 new lines first, more than the pipeline holds or a lookup takes.
    const fresh = Array.from({ length: 80 }, (_, i) => ({ ...greedy(`A bell in tower ${i}`), max_tokens: 1 }));
    const lines4 = [...fresh, ...bodies, bodies[0], bad];
    const second = await runBatch("read-2", "/v1/chat/completions", lines4, backend, { concurrency: 1, batchSize: 1, order: "file" });
    expect(second.result).toMatchObject({ completed: 83, failed: 1, cached: { lines: 3 } });
    expect(asked).toBe(80);
    const errors = readFileSync(path.join(root, "read-2-errors.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(errors).toMatchObject([{ custom_id: "r83", response: { status_code: 400 } }]);
    const lines = readFileSync(path.join(root, "read-2-output.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    // In the order they ended: the remembered lines, the file's last, did not wait for the 80 computing.
    const hits = lines.flatMap((l, i) => (l.cached === "hit" ? [[l.custom_id, i]] : []));
    expect(hits.map(([id]) => id)).toEqual(["r80", "r81", "r82"]);
    for (const [, at] of hits) expect(at).toBeLessThan(10);
    expect(new Set(lines.map((l) => l.custom_id)).size).toBe(83);

    // A run cancelled before its first line: every line cancelled, none answered from the store.
    const cancelled = new AbortController();
    cancelled.abort({ code: "batch_cancelled", message: "cancelled" });
    const input = path.join(root, "read-2-input.jsonl");
    const result = await runBatchFile({
      inputPath: input,
      outputPath: path.join(root, "read-3-output.jsonl"),
      errorPath: path.join(root, "read-3-errors.jsonl"),
      endpoint: "/v1/chat/completions",
      backend,
      batchSize: 8,
      concurrency: 8,
      signal: cancelled.signal,
    });
    expect(result).toMatchObject({ completed: 0, failed: 84, aborted: { code: "batch_cancelled" } });
    await cache.close();
  }, 120_000);

  it("collapses repeated embedding lines, and computes everything for a batch that turns the cache off", async () => {
    const cache = new LmdbResultCache(path.join(root, "store-b"), limits);
    const c = cachingOver(cache);
    const bodies = [
      { model: "m", input: "hello" },
      { input: "hello", model: "m" },
      { model: "m", input: "world" },
    ];
    const on = await runBatch("e1", "/v1/embeddings", bodies, c.backend);
    expect(on.result.completed).toBe(3);
    expect(c.count("computed")).toBe(2);
    expect(on.byId.get("r1")!.data[0].embedding).toEqual(on.byId.get("r0")!.data[0].embedding);

    const off = cachingOver(cache);
    await runBatch("e2", "/v1/embeddings", bodies, withCacheOptions(off.backend, { useCache: false }));
    expect(off.count("bypass")).toBe(3);
    expect(off.count("hit")).toBe(0);
    await cache.close();
  }, 120_000);

  it("keeps the engine's cached prompts to their scope as it keeps answers: another key's same prompt is evaluated whole", async () => {
    const prompt = "The vault opens with the words blue seven river, said the keeper, and nobody else may know them.";
    const sampled = { model: "m", messages: [{ role: "user", content: prompt }], temperature: 1, max_tokens: 4 };
    const run = async (name: string, cacheScope: string) => {
      const backend = withCacheOptions(llama, { cacheScope, useCache: false });
      return (await runBatch(name, "/v1/chat/completions", [sampled], backend)).byId.get("r0")!.usage;
    };
    const first = await run("scope-a1", "owner:a");
    expect(first.prompt_tokens_details.cached_tokens).toBe(0);
    // Its cached token count (or its speed) would tell key b what key a asked.
    expect((await run("scope-b", "owner:b")).prompt_tokens_details.cached_tokens).toBe(0);
    expect((await run("scope-a2", "owner:a")).prompt_tokens_details.cached_tokens).toBe(first.prompt_tokens - 1);
  }, 120_000);
});
