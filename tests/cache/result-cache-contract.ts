// The ResultCache contract, one suite run against each implementation (the embedded LMDB store, PostgreSQL): answers
// by scope and key, scopes kept apart, purges, the byte bound's least-recently-used order, the TTL, a corrupt entry a
// miss, entries kept across a close and a reopen.
import { beforeEach, describe, expect, it } from "vitest";
import type { ResultCache, ResultCacheLimits, StoredAnswer } from "../../cache/port.js";

export interface CacheHarness {
  /** A cache over storage that is empty at the test's start (a new folder, a new table), by the clock given. */
  fresh(): Promise<void>;
  open(limits: ResultCacheLimits, now: () => number): Promise<ResultCache>;
  /** Flips bytes of the stored answer under (scope, key), as a torn write or a bad disk would. */
  corrupt(scope: string, key: string): Promise<void>;
}

const answer = (text: string, pad = 0): StoredAnswer => ({
  body: {
    id: "chatcmpl-1",
    object: "chat.completion",
    created: 1,
    choices: [{ index: 0, message: { role: "assistant", content: text + "x".repeat(pad) } }],
  },
  usage: { promptTokens: 3, completionTokens: 2, cachedTokens: 0 },
  stops: [null],
});

const BIG = { maxBytes: 1 << 30, ttlSeconds: 0 };

export function resultCacheContract(name: string, skip: boolean, harness: () => CacheHarness): void {
  describe.skipIf(skip)(`the result cache on ${name}`, () => {
    const h = harness();
    let clock = 1_000_000;
    const now = () => clock;
    const opened: ResultCache[] = [];
    const open = async (limits: ResultCacheLimits = BIG) => {
      const c = await h.open(limits, now);
      opened.push(c);
      return c;
    };

    beforeEach(async () => {
      await Promise.all(opened.splice(0).map((c) => c.close()));
      clock = 1_000_000;
      await h.fresh();
      return async () => {
        await Promise.all(opened.splice(0).map((c) => c.close()));
      };
    });

    it("has: whether a fresh whole answer is held, in its scope only, with no hit counted and nothing refreshed", async () => {
      const c = await open({ maxBytes: 1 << 30, ttlSeconds: 60 });
      await c.put("alice", "k1", answer("hello"));
      expect(await c.has!("alice", "k1")).toBe(true);
      expect(await c.has!("bob", "k1")).toBe(false);
      expect(await c.has!("alice", "k2")).toBe(false);
      expect(await c.stats()).toMatchObject({ hits: 0, misses: 0 });
      await h.corrupt("alice", "k1");
      expect(await c.has!("alice", "k1")).toBe(false);
      await c.put("alice", "k3", answer("later"));
      clock += 61_000;
      expect(await c.has!("alice", "k3")).toBe(false);
    });

    it("answers what was put, under its scope and key only; a miss is undefined; stats count both", async () => {
      const c = await open();
      expect(await c.get("alice", "k1")).toBeUndefined();
      await c.put("alice", "k1", answer("hello"));
      expect(await c.get("alice", "k1")).toEqual(answer("hello"));
      expect(await c.get("bob", "k1")).toBeUndefined();
      expect(await c.get("alice", "k2")).toBeUndefined();
      const s = await c.stats();
      expect(s).toMatchObject({ entries: 1, hits: 1, misses: 3, evictions: 0 });
      expect(s.bytes).toBeGreaterThan(JSON.stringify(answer("hello")).length);
    });

    it("replaces an answer put again under the same key, counting it once", async () => {
      const c = await open();
      await c.put("alice", "k1", answer("one"));
      await c.put("alice", "k1", answer("two"));
      expect(await c.get("alice", "k1")).toEqual(answer("two"));
      expect((await c.stats()).entries).toBe(1);
    });

    it("takes many puts at once, some of one key: each key held once, the last put of it kept, the totals exact", async () => {
      const c = await open();
      const keys = Array.from({ length: 300 }, (_, i) => `k${i}`);
      await Promise.all([...keys.map((k) => c.put("alice", k, answer(k))), c.put("alice", "k7", answer("again"))]);
      expect(await c.get("alice", "k7")).toEqual(answer("again"));
      expect(await c.get("alice", "k299")).toEqual(answer("k299"));
      expect((await c.stats()).entries).toBe(300);
      // The totals are the rows': removing every row leaves none of the bytes counted.
      expect(await c.purge()).toBe(300);
      expect(await c.stats()).toMatchObject({ entries: 0, bytes: 0 });
    });

    it("answers many gets at once, across scopes, hits, misses and a corrupt entry each its own", async () => {
      const c = await open();
      const keys = Array.from({ length: 300 }, (_, i) => `k${i}`);
      await Promise.all(keys.filter((_, i) => i % 3 !== 0).map((k) => c.put("alice", k, answer(k))));
      await c.put("bob", "k0", answer("bob's"));
      await h.corrupt("alice", "k1");
      const got = await Promise.all([...keys.map((k) => c.get("alice", k)), c.get("bob", "k0"), c.get("bob", "k2")]);
      expect(got.slice(0, 300)).toEqual(keys.map((k, i) => (i % 3 === 0 || i === 1 ? undefined : answer(k))));
      expect(got.slice(300)).toEqual([answer("bob's"), undefined]);
      expect(await c.stats()).toMatchObject({ entries: 200, hits: 200, misses: 102 });
    });

    it("purges one scope's entries, leaving the others, or every entry", async () => {
      const c = await open();
      await c.put("alice", "k1", answer("a1"));
      await c.put("alice", "k2", answer("a2"));
      await c.put("alice2", "k1", answer("b1"));
      await c.put("bob", "k1", answer("c1"));
      expect(await c.purge("alice")).toBe(2);
      expect(await c.get("alice", "k1")).toBeUndefined();
      expect(await c.get("alice2", "k1")).toEqual(answer("b1"));
      expect(await c.get("bob", "k1")).toEqual(answer("c1"));
      expect(await c.purge()).toBe(2);
      expect(await c.get("bob", "k1")).toBeUndefined();
      expect(await c.stats()).toMatchObject({ entries: 0, bytes: 0 });
    });

    it("keeps under its byte bound by evicting the least recently used first (a read makes an entry recent)", async () => {
      const probe = await open();
      await probe.put("s", "probe", answer("p", 1000));
      const one = (await probe.stats()).bytes;
      await probe.close();
      opened.splice(0);
      await h.fresh();
      const c = await open({ maxBytes: Math.floor(one * 3.5), ttlSeconds: 0 });
      for (const k of ["a", "b", "c"]) {
        await c.put("s", k, answer(k, 1000));
        clock += 1000;
      }
      // A minute on: the embedded store makes a read entry recent at most once a minute (cache/lmdb-cache.ts).
      clock += 60_000;
      expect(await c.get("s", "a")).toBeDefined();
      await c.put("s", "d", answer("d", 1000));
      expect(await c.get("s", "b")).toBeUndefined();
      for (const k of ["a", "c", "d"]) expect(await c.get("s", k)).toEqual(answer(k, 1000));
      const s = await c.stats();
      expect(s).toMatchObject({ entries: 3, evictions: 1 });
      expect(s.bytes).toBeLessThanOrEqual(Math.floor(one * 3.5));
    });

    it("answers an entry until its TTL and then no more", async () => {
      const c = await open({ maxBytes: 1 << 30, ttlSeconds: 60 });
      await c.put("s", "k", answer("x"));
      clock += 59_000;
      expect(await c.get("s", "k")).toEqual(answer("x"));
      clock += 1_000;
      expect(await c.get("s", "k")).toBeUndefined();
      expect((await c.stats()).entries).toBe(0);
    });

    it("takes a corrupt entry for a miss, never a wrong answer, and drops it", async () => {
      const c = await open();
      await c.put("s", "k", answer("right"));
      await h.corrupt("s", "k");
      expect(await c.get("s", "k")).toBeUndefined();
      expect((await c.stats()).entries).toBe(0);
      await c.put("s", "k", answer("right"));
      expect(await c.get("s", "k")).toEqual(answer("right"));
    });

    it("keeps its entries, their order and totals across a close and a reopen (a restart)", async () => {
      const c = await open();
      await c.put("s", "k", answer("kept"));
      const before = await c.stats();
      await c.close();
      opened.splice(0);
      const again = await open();
      expect(await again.get("s", "k")).toEqual(answer("kept"));
      expect(await again.stats()).toMatchObject({ entries: before.entries, bytes: before.bytes });
    });
  });
}
