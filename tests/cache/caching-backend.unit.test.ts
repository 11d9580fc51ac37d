// The caching backend over a backend that counts what it computes: identical deterministic requests in flight run
// once, a stored answer is read with ids of its own, sampled requests and a request that says so bypass it, a failed
// computation fails its duplicates and is not stored, a streamed hit is told its text once.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { CachingBackend, cachedUsage, freshIds, OPEN_SCOPE } from "../../cache/caching-backend.js";
import { cacheKey } from "../../cache/key.js";
import { LmdbResultCache } from "../../cache/lmdb-cache.js";
import type { BackendResult, InferenceBackend, InferenceRequest } from "../../openai/backend.js";
import { RequestError } from "../../openai/errors.js";
import { hexId } from "../../openai/ids.js";
import { parseRequest } from "../../openai/parse.js";
import { heldPuts } from "../helpers/held-puts.js";

/** Answers a completion with its prompt reversed, after its caller lets it (so requests can be held in flight). */
class ReversingBackend implements InferenceBackend {
  readonly info = {
    model: "rev",
    kind: "test",
    endpoints: ["/v1/completions"] as const,
    concurrency: 4,
    generatedModel: false,
    settings: {},
    summary: "",
  };
  computed = 0;
  failNext = false;
  private gate = Promise.resolve();
  private open: () => void = () => undefined;
  hold() {
    this.gate = new Promise((r) => {
      this.open = r;
    });
  }
  release() {
    this.open();
  }
  check() {}
  async execute(request: InferenceRequest): Promise<BackendResult> {
    this.computed++;
    await this.gate;
    if (this.failNext) {
      this.failNext = false;
      throw new RequestError("the model fell over", "server_error", false);
    }
    const prompt = String((request.body as { prompt: string }).prompt);
    const text = [...prompt].reverse().join("");
    return {
      body: {
        id: `cmpl-${hexId(6)}`,
        object: "text_completion",
        created: 1,
        model: "rev",
        choices: [{ index: 0, text, finish_reason: "stop" }],
        usage: { prompt_tokens: prompt.length, completion_tokens: text.length, total_tokens: prompt.length + text.length },
      },
      usage: { promptTokens: prompt.length, completionTokens: text.length, cachedTokens: 0 },
      stops: [null],
    };
  }
  async close() {}
}

const root = mkdtempSync(path.join(tmpdir(), "obi-caching-backend-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const greedy = (prompt: string, extra: Record<string, unknown> = {}) =>
  parseRequest("/v1/completions", { model: "m", prompt, temperature: 0, max_tokens: 8, ...extra });
const texts = (rs: BackendResult[]) => rs.map((r) => (r.body.choices as Array<{ text: string }>)[0].text);

describe("the caching backend", () => {
  let inner: ReversingBackend;
  let cache: LmdbResultCache;
  let backend: CachingBackend;
  let n = 0;
  beforeEach(async () => {
    inner = new ReversingBackend();
    cache = new LmdbResultCache(path.join(root, String(++n)), { maxBytes: 1 << 24, ttlSeconds: 0 });
    backend = new CachingBackend(inner, { cache, identity: "model-a" });
    return () => cache.close();
  });

  it("runs identical greedy requests in flight once, each answered with its own id; a later one is a hit", async () => {
    inner.hold();
    const pending = [greedy("abc"), greedy("abc", { temperature: 0.0, n: 1 }), greedy("abc")].map((r) => backend.execute(r));
    // Held until the first has reached the model (its cache lookup can take longer than a moment on a loaded
    // machine), and a moment more for the other two, which started beside it, to find it in flight.
    while (inner.computed === 0) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 20));
    inner.release();
    const rs = await Promise.all(pending);
    expect(inner.computed).toBe(1);
    expect(texts(rs)).toEqual(["cba", "cba", "cba"]);
    expect(rs.map((r) => r.cached)).toEqual([undefined, "duplicate", "duplicate"]);
    expect(new Set(rs.map((r) => r.body.id)).size).toBe(3);
    for (const r of rs) expect(r.body.id).toMatch(/^cmpl-[0-9a-f]{12}$/);
    const hit = await backend.execute(greedy("abc"));
    expect(hit.cached).toBe("hit");
    expect(texts([hit])).toEqual(["cba"]);
    // Its whole prompt counts as cached, as OpenAI reports a cached prompt, in its usage and in its body's.
    expect(hit.usage).toEqual({ ...rs[0].usage, cachedTokens: rs[0].usage.promptTokens });
    expect((hit.body.usage as { prompt_tokens_details?: unknown }).prompt_tokens_details).toEqual({
      cached_tokens: rs[0].usage.promptTokens,
    });
    expect(inner.computed).toBe(1);
  });

  it("answers a caller that keeps its answer on disk (a batch line) only once the answer is stored, its duplicates too", async () => {
    let release = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const slow = heldPuts(cache, () => gate);
    const held = new CachingBackend(inner, { cache: slow, identity: "model-a" });
    inner.hold();
    const answered: string[] = [];
    // Told when the backend's part is done: the repeats at once (they compute nothing), the line once computed.
    const done: string[] = [];
    const ask = (name: string, waitForStore: boolean) =>
      held.execute(greedy("abc"), undefined, { waitForStore, onBackendDone: () => done.push(name) }).then((r) => {
        answered.push(name);
        return r;
      });
    const pending = [ask("line", true), ask("repeat", true), ask("interactive", false)];
    await new Promise((r) => setTimeout(r, 20));
    expect(done).toEqual(["repeat", "interactive"]);
    inner.release();
    await new Promise((r) => setTimeout(r, 20));
    // Only the one that does not keep its answer has it; the lines wait for the store, the line no longer computing.
    expect(answered).toEqual(["interactive"]);
    expect(done).toEqual(["repeat", "interactive", "line"]);
    expect(await slow.get(OPEN_SCOPE, cacheKey("model-a", greedy("abc")))).toBeUndefined();
    release();
    const rs = await Promise.all(pending);
    expect(answered.sort()).toEqual(["interactive", "line", "repeat"]);
    expect(rs.map((r) => r.cached)).toEqual([undefined, "duplicate", "duplicate"]);
    expect(await cache.get(OPEN_SCOPE, cacheKey("model-a", greedy("abc")))).toBeDefined();
    expect(inner.computed).toBe(1);
  });

  it("computes every sampled request without a seed, and every request that turns the cache off", async () => {
    const sampled = parseRequest("/v1/completions", { model: "m", prompt: "abc", temperature: 0.8 });
    await Promise.all([backend.execute(sampled), backend.execute(sampled)]);
    expect(inner.computed).toBe(2);
    await backend.execute(greedy("xyz"), undefined, { useCache: false });
    await backend.execute(greedy("xyz"), undefined, { useCache: false });
    expect(inner.computed).toBe(4);
    expect((await cache.stats()).entries).toBe(0);
  });

  it("tells a plan whether an answer is remembered, in its scope, without computing or counting a hit", async () => {
    expect(await backend.remembered(greedy("abc"), { cacheScope: "alice" })).toBe(false);
    await backend.execute(greedy("abc"), undefined, { cacheScope: "alice" });
    expect(await backend.remembered(greedy("abc", { n: 1 }), { cacheScope: "alice" })).toBe(true);
    expect(await backend.remembered(greedy("abc"), { cacheScope: "bob" })).toBe(false);
    expect(await backend.remembered(greedy("abc"), { cacheScope: "alice", useCache: false })).toBe(false);
    const sampled = parseRequest("/v1/completions", { model: "m", prompt: "abc", temperature: 0.8 });
    expect(await backend.remembered(sampled, { cacheScope: "alice" })).toBe(false);
    expect(inner.computed).toBe(1);
    expect((await cache.stats()).hits).toBe(0);
  });

  it("keeps scopes apart: another scope's identical request computes", async () => {
    await backend.execute(greedy("abc"), undefined, { cacheScope: "alice" });
    expect((await backend.execute(greedy("abc"), undefined, { cacheScope: "bob" })).cached).toBeUndefined();
    expect((await backend.execute(greedy("abc"), undefined, { cacheScope: "alice" })).cached).toBe("hit");
    expect(inner.computed).toBe(2);
  });

  it("keeps models apart: another identity computes", async () => {
    await backend.execute(greedy("abc"));
    const other = new CachingBackend(inner, { cache, identity: Promise.resolve("model-b") });
    expect((await other.execute(greedy("abc"))).cached).toBeUndefined();
    expect(inner.computed).toBe(2);
  });

  it("computes every request of a model whose identity could not be known (a file that cannot be hashed)", async () => {
    const unknown = new CachingBackend(inner, { cache, identity: Promise.resolve(null) });
    await Promise.all([unknown.execute(greedy("abc")), unknown.execute(greedy("abc"))]);
    expect(inner.computed).toBe(2);
    expect((await cache.stats()).entries).toBe(0);
  });

  it("fails every duplicate of a failed computation with its error, and stores nothing", async () => {
    inner.hold();
    inner.failNext = true;
    const pending = [greedy("abc"), greedy("abc")].map((r) => backend.execute(r).catch((e: Error) => e));
    await new Promise((r) => setTimeout(r, 10));
    inner.release();
    const [a, b] = await Promise.all(pending);
    expect(a).toBeInstanceOf(RequestError);
    expect(b).toBe(a);
    expect((await cache.stats()).entries).toBe(0);
    expect(texts([await backend.execute(greedy("abc"))])).toEqual(["cba"]);
    expect(inner.computed).toBe(2);
  });

  it("lets a duplicate whose computation its own caller called off compute it anew", async () => {
    inner.hold();
    const leader = new AbortController();
    const inner2 = inner;
    const first = backend.execute(greedy("abc"), leader.signal).catch((e: Error) => e);
    await new Promise((r) => setTimeout(r, 5));
    const second = backend.execute(greedy("abc"));
    inner2.failNext = true;
    leader.abort(new Error("called off"));
    inner2.release();
    expect(await first).toBeInstanceOf(Error);
    expect(texts([await second])).toEqual(["cba"]);
  });

  it("tells a streamed hit its text once, word by word, and its prompt's usage", async () => {
    await backend.execute(greedy("hello"));
    await backend.execute(greedy("two words  here"));
    const words: string[] = [];
    await backend.execute(greedy("two words  here"), undefined, { onText: (_c, t) => words.push(t) });
    expect(words).toEqual(["ereh  ", "sdrow ", "owt"]);
    const told: string[] = [];
    const prompts: number[] = [];
    const hit = await backend.execute(greedy("hello"), undefined, {
      onText: (_c, t) => told.push(t),
      onPrompt: (u) => prompts.push(u.promptTokens),
    });
    expect(hit.cached).toBe("hit");
    expect(told).toEqual(["olleh"]);
    expect(prompts).toEqual([5]);
  });

  it("gives a body fresh ids and times, leaving the rest as computed", () => {
    const computed = { id: "chatcmpl-0123456789abcdef01234567", created: 5, object: "chat.completion", choices: [{ index: 0 }] };
    const fresh = freshIds(structuredClone(computed));
    expect(fresh.id).toMatch(/^chatcmpl-[0-9a-f]{24}$/);
    expect(fresh.id).not.toBe(computed.id);
    expect(fresh.created).toBeGreaterThan(1_700_000_000);
    expect({ ...fresh, id: computed.id, created: 5 }).toEqual(computed);
  });

  it("says a remembered Anthropic message read its whole prompt from the cache, as Anthropic counts it", () => {
    const message = {
      type: "message",
      usage: { input_tokens: 12, cache_read_input_tokens: 10, cache_creation_input_tokens: 0, output_tokens: 5 },
    };
    expect(cachedUsage(message).usage).toEqual({
      input_tokens: 0,
      cache_read_input_tokens: 22,
      cache_creation_input_tokens: 0,
      output_tokens: 5,
    });
  });
});
