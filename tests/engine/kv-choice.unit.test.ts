// Choosing the KV cache per batch run, without a model: when the pool is made again, and what waits for it.
import { describe, expect, it } from "vitest";
import { KvChoice, unifiedSuits } from "../../engine/pool/kv-choice.js";
import type { SequencePool } from "../../engine/pool/sequence-pool.js";

/** Just what KvChoice reads of a pool: its cache, its size, its counters, and close. */
function fakePool(kvUnified: boolean, steps = 0) {
  const pool = {
    kvUnified,
    size: 8,
    closed: false,
    batchStats: { steps, sequences: 0, tokens: steps * 10, waitTurns: 0, microBatches: steps },
    copyStats: { copies: 1, tokens: 5 },
    yieldStats: { yields: 1, tokens: 7 },
    close: async () => {
      pool.closed = true;
    },
  };
  return pool as unknown as SequencePool & { closed: boolean; batchStats: { steps: number } };
}

const families = { lines: 100, familyLines: 80 };
const apart = { lines: 100, familyLines: 10 };

describe("unifiedSuits", () => {
  it("wants a unified cache where at least half the lines open like another, and no switch for a run that fits the sequences", () => {
    expect(unifiedSuits(families, 64)).toBe(true);
    expect(unifiedSuits({ lines: 100, familyLines: 50 }, 64)).toBe(true);
    expect(unifiedSuits(apart, 64)).toBe(false);
    expect(unifiedSuits({ lines: 64, familyLines: 64 }, 64)).toBeUndefined();
  });
});

describe("KvChoice", () => {
  it("makes the pool again with the cache a run suits, once, and keeps the counters of the pool it closed", async () => {
    const made: boolean[] = [];
    const first = fakePool(false, 3);
    const kv = new KvChoice(first, async (unified) => {
      made.push(unified);
      return fakePool(unified, 2);
    });
    await kv.prepare(families);
    expect(first.closed).toBe(true);
    expect(kv.current.kvUnified).toBe(true);
    await kv.prepare(families);
    expect(made).toEqual([true]);
    expect(kv.stats().steps).toBe(5);
    expect(kv.stats().copies).toBe(2);
    expect(kv.stats().yields).toBe(2);
    await kv.prepare(apart);
    expect(made).toEqual([true, false]);
    expect(kv.switches).toEqual({ toUnified: 1, toStreams: 1 });
  });

  it("never switches under a request: a run that starts while one is in flight keeps the cache", async () => {
    const kv = new KvChoice(fakePool(false), async (unified) => fakePool(unified));
    let finish!: () => void;
    const running = kv.run(() => new Promise<void>((r) => (finish = r)));
    await kv.prepare(families);
    expect(kv.current.kvUnified).toBe(false);
    finish();
    await running;
    await kv.prepare(families);
    expect(kv.current.kvUnified).toBe(true);
  });

  it("requests that arrive during a switch wait for the new pool", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const kv = new KvChoice(fakePool(false), async (unified) => {
      await gate;
      return fakePool(unified);
    });
    const switching = kv.prepare(families);
    const seen = kv.run(async (pool) => pool.kvUnified);
    release();
    await switching;
    expect(await seen).toBe(true);
  });

  it("with switching off (KV_UNIFIED true or false) keeps its pool", async () => {
    const pool = fakePool(false);
    const kv = new KvChoice(pool, null);
    await kv.prepare(families);
    expect(kv.current).toBe(pool);
    expect(kv.auto).toBe(false);
  });

  it("a cache that cannot be made leaves the engine on the one it had, with a line saying why", async () => {
    const logged: string[] = [];
    const kv = new KvChoice(
      fakePool(false),
      async (unified) => {
        if (unified) throw new Error("out of memory");
        return fakePool(false);
      },
      (msg) => logged.push(msg),
    );
    await kv.prepare(families);
    expect(kv.current.kvUnified).toBe(false);
    expect(kv.switches).toEqual({ toUnified: 0, toStreams: 0 });
    expect(logged).toEqual(["could not switch the KV cache; keeping the previous one"]);
  });
});
