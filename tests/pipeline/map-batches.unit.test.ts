import { describe, expect, it } from "vitest";
import { mapBatches, type Outcome } from "../../pipeline/map-batches.js";

/** A source that records how far it has been read. */
function countingSource(n: number) {
  const state = { pulled: 0, closed: false };
  async function* gen() {
    try {
      for (let i = 0; i < n; i++) {
        state.pulled++;
        yield i;
      }
    } finally {
      state.closed = true;
    }
  }
  return { state, source: gen() };
}

/** A promise per item, settled by the test: full control of completion order. */
function gate<T>() {
  const waiting = new Map<number, { resolve: (v: T) => void; reject: (e: unknown) => void }>();
  const started: number[] = [];
  const fn = (i: number, signal: AbortSignal) =>
    new Promise<T>((resolve, reject) => {
      started.push(i);
      waiting.set(i, { resolve, reject });
      signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")), { once: true });
    });
  return { fn, started, waiting };
}

const tick = () => new Promise((r) => setImmediate(r));
const settle = async () => {
  for (let i = 0; i < 10; i++) await tick();
};

describe("mapBatches", () => {
  it("maps every item and delivers each outcome once", async () => {
    const { source } = countingSource(25);
    const got = new Map<number, Outcome<number>>();
    const r = await mapBatches(source, {
      batchSize: 4,
      concurrency: 3,
      fn: async (i) => {
        await tick();
        if (i % 7 === 0) throw new Error(`bad ${i}`);
        return i * 2;
      },
      onResult: (i, o) => void got.set(i, o),
    });
    expect(r).toEqual({ aborted: false, unstarted: [] });
    expect(got.size).toBe(25);
    expect(got.get(3)).toEqual({ ok: true, value: 6 });
    expect(got.get(14)).toMatchObject({ ok: false, error: new Error("bad 14") });
  });

  it("delivers in order of completion, not of input", async () => {
    const { source } = countingSource(3);
    const g = gate<string>();
    const order: number[] = [];
    const run = mapBatches(source, { batchSize: 3, concurrency: 3, fn: g.fn, onResult: (i) => void order.push(i) });
    await settle();
    g.waiting.get(2)!.resolve("c");
    await settle();
    g.waiting.get(0)!.resolve("a");
    await settle();
    g.waiting.get(1)!.resolve("b");
    await run;
    expect(order).toEqual([2, 0, 1]);
  });

  it("never has more than `concurrency` calls in flight, and reads the source only a batch ahead", async () => {
    const { source, state } = countingSource(1000);
    let inFlight = 0;
    let maxInFlight = 0;
    let maxAhead = 0;
    let delivered = 0;
    await mapBatches(source, {
      batchSize: 8,
      concurrency: 3,
      fn: async (i) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await new Promise((r) => setTimeout(r, i % 3));
        inFlight--;
        return i;
      },
      onResult: () => {
        delivered++;
        maxAhead = Math.max(maxAhead, state.pulled - delivered);
      },
    });
    expect(delivered).toBe(1000);
    expect(maxInFlight).toBe(3);
    // Pulled but not yet delivered: at most one batch waiting plus the calls in flight.
    expect(maxAhead).toBeLessThanOrEqual(8 + 3);
  });

  it("applies backpressure: a slow onResult holds its slot, so the source is not drained ahead", async () => {
    const { source, state } = countingSource(100);
    let release!: () => void;
    const blocked = new Promise<void>((r) => (release = r));
    const run = mapBatches(source, {
      batchSize: 5,
      concurrency: 2,
      fn: async (i) => i,
      onResult: () => blocked,
    });
    await settle();
    expect(state.pulled).toBeLessThanOrEqual(5 + 2);
    release();
    await run;
    expect(state.pulled).toBe(100);
  });

  it("on abort stops pulling, aborts calls in flight, returns the unstarted items and leaves the source open", async () => {
    const { source, state } = countingSource(50);
    const g = gate<number>();
    const ac = new AbortController();
    const outcomes: Array<[number, boolean]> = [];
    const run = mapBatches(source, {
      batchSize: 6,
      concurrency: 2,
      fn: g.fn,
      onResult: (i, o) => void outcomes.push([i, o.ok]),
      signal: ac.signal,
    });
    await settle();
    g.waiting.get(0)!.resolve(0);
    await settle();
    expect(g.started).toEqual([0, 1, 2]);
    ac.abort({ code: "batch_cancelled", message: "x" });
    const r = await run;
    expect(r.aborted).toBe(true);
    expect(outcomes).toEqual([
      [0, true],
      [1, false],
      [2, false],
    ]);
    expect(r.unstarted).toEqual([3, 4, 5]);
    expect(state.pulled).toBe(6);
    expect(state.closed).toBe(false);
    // The caller may read the rest.
    let rest = 0;
    for await (const _ of source) rest++;
    expect(rest).toBe(44);
  });

  it("on drain starts nothing new but lets the calls in flight finish and deliver; the signal can still cut them short", async () => {
    const { source, state } = countingSource(50);
    const g = gate<number>();
    const drain = new AbortController();
    const ac = new AbortController();
    const outcomes: Array<[number, boolean]> = [];
    const run = mapBatches(source, {
      batchSize: 6,
      concurrency: 3,
      fn: g.fn,
      onResult: (i, o) => void outcomes.push([i, o.ok]),
      signal: ac.signal,
      drain: drain.signal,
    });
    await settle();
    expect(g.started).toEqual([0, 1, 2]);
    drain.abort();
    g.waiting.get(0)!.resolve(0);
    await settle();
    // The freed slot is not refilled.
    expect(g.started).toEqual([0, 1, 2]);
    g.waiting.get(1)!.resolve(1);
    await settle();
    ac.abort({ code: "shutdown", message: "grace period over" });
    const r = await run;
    expect(r.aborted).toBe(true);
    expect(outcomes).toEqual([
      [0, true],
      [1, true],
      [2, false],
    ]);
    expect(r.unstarted).toEqual([3, 4, 5]);
    expect(state.pulled).toBe(6);
  });

  it("a drain after the last item started stops nothing", async () => {
    const { source } = countingSource(3);
    const g = gate<number>();
    const drain = new AbortController();
    const run = mapBatches(source, { batchSize: 4, concurrency: 4, fn: g.fn, onResult: () => {}, drain: drain.signal });
    await settle();
    drain.abort();
    for (const w of g.waiting.values()) w.resolve(0);
    expect(await run).toEqual({ aborted: false, unstarted: [] });
  });

  it("an already-aborted signal starts nothing", async () => {
    const { source, state } = countingSource(5);
    const calls: number[] = [];
    const r = await mapBatches(source, {
      batchSize: 2,
      concurrency: 2,
      fn: async (i) => void calls.push(i),
      onResult: () => {},
      signal: AbortSignal.abort(),
    });
    expect(r.aborted).toBe(true);
    expect(calls).toEqual([]);
    expect(state.pulled).toBe(0);
  });

  it("an onResult failure aborts the calls in flight, closes the source and rejects", async () => {
    const { source, state } = countingSource(20);
    const signals: AbortSignal[] = [];
    const run = mapBatches(source, {
      batchSize: 4,
      concurrency: 3,
      fn: (i, signal) => {
        signals.push(signal);
        if (i === 0) return Promise.resolve(i);
        return new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted"))));
      },
      onResult: () => {
        throw new Error("disk full");
      },
    });
    await expect(run).rejects.toThrow("disk full");
    expect(signals.every((s) => s.aborted)).toBe(true);
    expect(state.closed).toBe(true);
  });

  it("a failing source rejects after the calls in flight settle", async () => {
    async function* broken() {
      yield 1;
      yield 2;
      throw new Error("read error");
    }
    const delivered: number[] = [];
    await expect(
      mapBatches(broken(), {
        batchSize: 1,
        concurrency: 2,
        fn: (i) => new Promise<number>((r) => setTimeout(() => r(i), 20)),
        onResult: (i) => void delivered.push(i),
      }),
    ).rejects.toThrow("read error");
    expect(delivered.sort()).toEqual([1, 2]);
  });

  it("rejects bad sizes", async () => {
    const opts = { fn: async () => 0, onResult: () => {} };
    await expect(mapBatches(countingSource(1).source, { ...opts, batchSize: 0, concurrency: 1 })).rejects.toThrow(RangeError);
    await expect(mapBatches(countingSource(1).source, { ...opts, batchSize: 1, concurrency: 1.5 })).rejects.toThrow(RangeError);
  });

  it("handles an empty source", async () => {
    const r = await mapBatches(countingSource(0).source, { batchSize: 3, concurrency: 2, fn: async () => 0, onResult: () => {} });
    expect(r).toEqual({ aborted: false, unstarted: [] });
  });
});
