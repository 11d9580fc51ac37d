// The run's default concurrency is the backend's; the local one keeps a request waiting for every sequence:
// twice the engine's sequences, over the embedded result cache too. Over a cache that commits across a network,
// whose lines wait longer for their answers' store, four times that in flight, of which the engine's concurrency
// computes at once.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CachingBackend } from "../../cache/caching-backend.js";
import { LmdbResultCache } from "../../cache/lmdb-cache.js";
import type { ResultCache } from "../../cache/port.js";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import type { Engine } from "../../engine/types.js";
import { runBatchFile } from "../../pipeline/run-batch.js";
import { completionJsonl } from "../../testkit/workload.js";
import { heldPuts } from "../helpers/held-puts.js";
import { scratchDir } from "../helpers/scratch.js";
import { testEngine } from "../helpers/test-engine.js";

const scratch = scratchDir("concurrency");
let engine: Engine;
beforeAll(async () => {
  engine = await testEngine();
});
afterAll(async () => {
  await engine?.close();
});

/** The real engine, counting how many completions are in flight at once. */
function counting(inner: Engine) {
  let now = 0;
  let max = 0;
  const wrapped: Engine = {
    get info() {
      return inner.info;
    },
    complete: async (prompt, params, signal, borrower) => {
      max = Math.max(max, ++now);
      try {
        return await inner.complete(prompt, params, signal, borrower);
      } finally {
        now--;
      }
    },
    chat: (messages, params, signal, borrower) => inner.chat(messages, params, signal, borrower),
    embed: (inputs, signal, borrower) => inner.embed(inputs, signal, borrower),
    rank: (pairs, param, signal, borrower) => inner.rank(pairs, param, signal, borrower),
    countTokens: (t) => inner.countTokens(t),
    chatPromptTokens: (m, f) => inner.chatPromptTokens(m, f),
    detokenize: (t) => inner.detokenize(t),
    get vocabularySize() {
      return inner.vocabularySize;
    },
    isEndOfGeneration: (t) => inner.isEndOfGeneration(t),
    scheduling: () => inner.scheduling(),
    prepareRun: (shape) => inner.prepareRun(shape),
    close: () => inner.close(),
  };
  return { engine: wrapped, max: () => max };
}

describe("default concurrency", () => {
  it("is twice the sequences", () => {
    expect(new LlamaBackend(engine).info.concurrency).toBe(2 * engine.info.sequences);
  });

  it("a run left at 0 keeps twice the engine's sequences in flight", async () => {
    const c = counting(engine);
    const r = await runBatchFile({
      inputPath: await scratch.write(completionJsonl(24, { prefix: "r" }), "in.jsonl"),
      outputPath: await scratch.file("out.jsonl"),
      errorPath: await scratch.file("err.jsonl"),
      endpoint: "/v1/completions",
      backend: new LlamaBackend(c.engine),
      batchSize: 64,
      concurrency: 0,
    });
    expect(r.completed).toBe(24);
    expect(c.max()).toBe(2 * engine.info.sequences);
  });

  it.each([
    { store: "the embedded result cache", remote: false, multiple: 2 },
    { store: "a result cache across a network", remote: true, multiple: 8 },
  ])(
    "a run over $store keeps $multiple times the sequences in flight, and computes only twice them at once",
    async ({ remote, multiple }) => {
      const n = 8 * engine.info.sequences + 8;
      const dir = mkdtempSync(path.join(tmpdir(), "obi-concurrency-cache-"));
      const cache = new LmdbResultCache(dir, { maxBytes: 1 << 26, ttlSeconds: 0 });
      // The stores are held until as many lines wait on theirs as the run keeps in flight: where that is more than the
      // engine computes, it must have gone on computing the next lines meanwhile, never more than its concurrency at once.
      const held = heldStores(cache, multiple * engine.info.sequences, remote);
      const c = counting(engine);
      try {
        const r = await runBatchFile({
          inputPath: await scratch.write(completionJsonl(n, { prefix: "c" }), "cached-in.jsonl"),
          outputPath: await scratch.file("cached-out.jsonl"),
          errorPath: await scratch.file("cached-err.jsonl"),
          endpoint: "/v1/completions",
          backend: new CachingBackend(new LlamaBackend(c.engine), { cache: held.cache, identity: Promise.resolve("concurrency-test") }),
          batchSize: 64,
          concurrency: 0,
        });
        expect(r.completed).toBe(n);
        expect(held.maxWaiting()).toBe(multiple * engine.info.sequences);
        expect(c.max()).toBe(2 * engine.info.sequences);
        expect((await cache.stats()).entries).toBe(n);
      } finally {
        await cache.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});

/** `inner` with each store held until `until` stores wait at once, then every store goes through; `remote` as said. */
function heldStores(inner: ResultCache, until: number, remote: boolean) {
  let waiting = 0;
  let maxWaiting = 0;
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  const cache = heldPuts(inner, async () => {
    maxWaiting = Math.max(maxWaiting, ++waiting);
    if (waiting >= until) open();
    await opened;
    waiting--;
  });
  return { cache: { ...cache, remote }, maxWaiting: () => maxWaiting };
}
