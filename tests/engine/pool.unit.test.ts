import { describe, expect, it, onTestFinished, vi } from "vitest";
import { MAX_PASSED_OVER, ResourcePool } from "../../engine/pool/pool.js";
import { batchFloor, interactiveReserve } from "../../engine/pool/sequence-pool.js";
import { BATCH_WORK, type Borrower, RequestError } from "../../engine/types.js";
import type { Lane } from "../../openai/backend.js";
import { callOffUnbegun } from "../../pipeline/call-off.js";

const INTERACTIVE: Borrower = { lane: "interactive" };

describe("ResourcePool", () => {
  it("hands out free items, then serves waiters first come, first served", async () => {
    const pool = new ResourcePool(["a"]);
    const first = await pool.acquire(BATCH_WORK);
    const order: string[] = [];
    const waiting = [1, 2, 3].map((n) =>
      pool.acquire(BATCH_WORK).then((item) => {
        order.push(`${n}:${item}`);
        return item;
      }),
    );
    pool.release(first);
    const second = await waiting[0];
    pool.release(second);
    pool.release(await waiting[1]);
    await waiting[2];
    expect(order).toEqual(["1:a", "2:a", "3:a"]);
  });

  it("tells a request's begin listener as it is lent an item, at once or when one is released, and never if it gives up waiting", async () => {
    const pool = new ResourcePool(["a"]);
    const told: string[] = [];
    const held = await pool.acquire({ lane: "batch", onBegin: () => told.push("first") });
    expect(told).toEqual(["first"]);
    const controller = new AbortController();
    const gaveUp = pool.acquire({ lane: "batch", onBegin: () => told.push("gave up") }, controller.signal);
    const waiting = pool.acquire({ lane: "batch", onBegin: () => told.push("second") });
    controller.abort();
    await expect(gaveUp).rejects.toMatchObject({ name: "AbortError" });
    expect(told).toEqual(["first"]);
    pool.release(held);
    // Told as it is lent, before the waiter's own code runs.
    expect(told).toEqual(["first", "second"]);
    expect(await waiting).toBe("a");
  });

  it("says whether a live request waits, so a released item would go to it at once", async () => {
    const pool = new ResourcePool(["a"]);
    const held = await pool.acquire(BATCH_WORK);
    expect(pool.contended).toBe(false);
    const controller = new AbortController();
    const aborted = pool.acquire(BATCH_WORK, controller.signal);
    expect(pool.contended).toBe(true);
    controller.abort();
    await expect(aborted).rejects.toMatchObject({ name: "AbortError" });
    expect(pool.contended).toBe(false);
    const waiting = pool.acquire(BATCH_WORK);
    expect(pool.contended).toBe(true);
    pool.release(held);
    expect(pool.contended).toBe(false);
    expect(await waiting).toBe("a");
  });

  it("lets the chooser pick among free items", async () => {
    const pool = new ResourcePool(["x", "yy", "zzz"]);
    expect(await pool.acquire(BATCH_WORK, undefined, { choose: (free) => free.findIndex((s) => s.length === 2) })).toBe("yy");
    expect(pool.available).toBe(2);
  });

  it("rejects an aborted waiter with an AbortError and skips it on release", async () => {
    const pool = new ResourcePool([1]);
    const held = await pool.acquire(BATCH_WORK);
    const controller = new AbortController();
    const aborted = pool.acquire(BATCH_WORK, controller.signal);
    const next = pool.acquire(BATCH_WORK);
    controller.abort();
    await expect(aborted).rejects.toMatchObject({ name: "AbortError" });
    pool.release(held);
    expect(await next).toBe(1);
  });

  it("rejects at once when the signal is already aborted", async () => {
    const pool = new ResourcePool([1]);
    await expect(pool.acquire(BATCH_WORK, AbortSignal.abort())).rejects.toMatchObject({ name: "AbortError" });
    expect(pool.available).toBe(1);
  });

  it("lets a request that waits to begin go when its run drains, caused by the drain; one resuming keeps waiting", async () => {
    const pool = new ResourcePool(["a"]);
    const drain = new AbortController();
    const reason = { code: "shutdown", message: "Interrupted." };
    // One try of a run's request on the pool, as the pipeline makes it (pipeline/call-off.ts).
    const request = (work: (signal: AbortSignal, borrower: Borrower) => Promise<string>) =>
      callOffUnbegun(drain.signal, new AbortController().signal, (signal, onBegin) => work(signal, { lane: "batch", onBegin }));
    // A request that began (it was lent "a"), then gave its item up (to an interactive request, say) and waits anew.
    let handOver!: () => void;
    const handed = new Promise<void>((r) => {
      handOver = r;
    });
    const resuming = request(async (signal, borrower) => {
      const item = await pool.acquire(borrower, signal);
      await handed;
      pool.release(item);
      return pool.acquire(borrower, signal, { resumed: true });
    });
    const taking = pool.acquire(BATCH_WORK);
    const waiting = request((signal, borrower) => pool.acquire(borrower, signal));
    handOver();
    const held = await taking;
    const unrelated = pool.acquire(BATCH_WORK);
    drain.abort(reason);
    await expect(waiting).rejects.toMatchObject({ name: "NotBegun", cause: reason });
    // Once drained, nothing of the run begins, even with an item free.
    pool.release(held);
    expect(await resuming).toBe("a");
    pool.release("a");
    expect(await unrelated).toBe("a");
    pool.release("a");
    await expect(request((signal, borrower) => pool.acquire(borrower, signal))).rejects.toMatchObject({ name: "NotBegun", cause: reason });
    expect(pool.available).toBe(1);
  });

  it("fails waiters and new requests once closed", async () => {
    const pool = new ResourcePool([1]);
    await pool.acquire(BATCH_WORK);
    const waiter = pool.acquire(BATCH_WORK);
    pool.close();
    await expect(waiter).rejects.toBeInstanceOf(RequestError);
    await expect(pool.acquire(BATCH_WORK)).rejects.toMatchObject({ code: "engine_closed", retryable: true });
  });

  it("gives a released item to the waiter it suits best, the oldest on a tie", async () => {
    const pool = new ResourcePool(["abc", "xyz"]);
    const x = await pool.acquire(BATCH_WORK, undefined, { choose: (free) => free.indexOf("xyz") });
    const a = await pool.acquire(BATCH_WORK);
    const shared = (prompt: string) => (item: string) => [...item].findIndex((c, i) => prompt[i] !== c) >>> 0;
    const got: string[] = [];
    const wait = (name: string, prompt: string) =>
      pool.acquire(BATCH_WORK, undefined, { affinity: shared(prompt) }).then((item) => got.push(`${name}:${item}`));
    const first = wait("first", "qqq");
    const second = wait("second", "xyq");
    const third = wait("third", "abq");
    pool.release(x);
    pool.release(a);
    await Promise.all([second, third]);
    expect(got).toEqual(["second:xyz", "third:abc"]);
    // Nothing left that suits it better: the oldest gets the next item whatever it holds.
    pool.release("zzz");
    await first;
    expect(got[2]).toBe("first:zzz");
  });

  it("serves the oldest waiter once it has been passed over MAX_PASSED_OVER times", async () => {
    const pool = new ResourcePool(["held"]);
    await pool.acquire(BATCH_WORK);
    let oldestServed = false;
    void pool.acquire(BATCH_WORK, undefined, { affinity: () => 0 }).then(() => (oldestServed = true));
    const served: number[] = [];
    for (let i = 0; i <= MAX_PASSED_OVER; i++) {
      void pool.acquire(BATCH_WORK, undefined, { affinity: () => 1 }).then(() => served.push(i));
    }
    for (let i = 0; i <= MAX_PASSED_OVER; i++) pool.release("item");
    await new Promise((r) => setImmediate(r));
    expect(served).toHaveLength(MAX_PASSED_OVER);
    expect(oldestServed).toBe(true);
  });

  it("use gives the item back however the work ends, its error mapped", async () => {
    const pool = new ResourcePool(["only"]);
    expect(await pool.use(BATCH_WORK, undefined, async (item) => `${item}!`)).toBe("only!");
    const failed = pool.use(
      BATCH_WORK,
      undefined,
      async () => {
        throw new Error("boom");
      },
      (err) => new Error(`mapped: ${(err as Error).message}`),
    );
    await expect(failed).rejects.toThrow("mapped: boom");
    expect(pool.available).toBe(1);
    const stop = new AbortController();
    stop.abort();
    await expect(pool.use(BATCH_WORK, stop.signal, async () => "never")).rejects.toThrow();
    expect(pool.available).toBe(1);
  });

  it("serves the interactive lane's waiters before the batch lane's, first come first served within each", async () => {
    const pool = new ResourcePool(["a"]);
    const held = await pool.acquire(BATCH_WORK);
    const order: string[] = [];
    const wait = async (name: string, lane: Lane, affinity?: () => number) => {
      const item = await pool.acquire({ lane }, undefined, { affinity });
      order.push(name);
      pool.release(item);
    };
    // A batch line whose prompt the item suits best still waits behind interactive requests that came later.
    const all = [
      wait("batch 1", "batch", () => 10),
      wait("batch 2", "batch"),
      wait("interactive 1", "interactive"),
      wait("interactive 2", "interactive"),
    ];
    expect(pool.contended).toBe(true);
    pool.release(held);
    await Promise.all(all);
    expect(order).toEqual(["interactive 1", "interactive 2", "batch 1", "batch 2"]);
  });

  it("keeps its reserve free of batch work while the interactive lane is warm, then gives it back", async () => {
    // The clock is faked: on a saturated machine two real 20 ms sleeps could outlast the lane's 200 ms warmth.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    onTestFinished(() => {
      vi.useRealTimers();
    });
    const pool = new ResourcePool(["a", "b", "c", "d"], { reserve: 1, warmMs: 200 });
    // Cold: the batches take every item.
    const cold = [
      await pool.acquire(BATCH_WORK),
      await pool.acquire(BATCH_WORK),
      await pool.acquire(BATCH_WORK),
      await pool.acquire(BATCH_WORK),
    ];
    for (const item of cold) pool.release(item);
    // An interactive request warms the lane: from then on one item stays free for the next.
    pool.release(await pool.acquire(INTERACTIVE));
    const batch = [await pool.acquire(BATCH_WORK), await pool.acquire(BATCH_WORK), await pool.acquire(BATCH_WORK)];
    let fourth: string | undefined;
    const waiting = pool.acquire(BATCH_WORK).then((item) => (fourth = item));
    await vi.advanceTimersByTimeAsync(20);
    expect(fourth).toBeUndefined();
    expect(pool.available).toBe(1);
    // The next interactive request starts at once, on the reserve; its release refills the reserve, not the batch.
    const interactive = await pool.acquire(INTERACTIVE);
    pool.release(interactive);
    await vi.advanceTimersByTimeAsync(20);
    expect(fourth).toBeUndefined();
    // A batch line that ends passes its item on to the waiting one: the reserve is whole.
    pool.release(batch[0]);
    expect(await waiting).toBe(batch[0]);
    // Once the lane is cold, the reserve goes to batch work again.
    const fifth = pool.acquire(BATCH_WORK);
    await vi.advanceTimersByTimeAsync(260);
    expect(await fifth).toBe(interactive);
    expect(pool.available).toBe(0);
  });

  it("makes its reserve of the items the interactive lane gave back last, and gives batch work the others", async () => {
    const pool = new ResourcePool(["a", "b", "c", "d", "e"], { reserve: 2, warmMs: 60_000 });
    const first = await pool.acquire(INTERACTIVE);
    const second = await pool.acquire(INTERACTIVE);
    expect([first, second]).toEqual(["e", "d"]);
    // Three free, two of them the reserve: batch work takes one; the next batch line waits.
    expect(await pool.acquire(BATCH_WORK)).toBe("a");
    const waiting = pool.acquire(BATCH_WORK);
    // The lane's item joins the reserve, and the waiting line gets the free item the lane never used.
    pool.release(first, "interactive");
    expect(await waiting).toBe("b");
    pool.release(second, "interactive");
    // Batch work takes the items batch work gave back, the last first, and leaves the lane's, which came back later.
    pool.release("a");
    expect(await pool.acquire(BATCH_WORK)).toBe("a");
    expect(await pool.acquire(BATCH_WORK)).toBe("c");
    expect(pool.available).toBe(2);
    // The lane chooses among all free items, and finds its own.
    expect(await pool.acquire(INTERACTIVE, undefined, { choose: (free) => free.indexOf("e") })).toBe("e");
    // Past the reserve, batch work takes what batch work gave back.
    pool.release("b");
    pool.release("e", "interactive");
    expect(await pool.acquire(BATCH_WORK)).toBe("b");
    expect(pool.available).toBe(2);
    // With only the lane's items free, a line waiting when the lane gives one more back gets its oldest, "d".
    const line = pool.acquire(BATCH_WORK);
    pool.release("c", "interactive");
    expect(await line).toBe("d");
    expect(pool.available).toBe(2);
  });

  it("sizes the interactive reserve of a sequence pool at one sequence in sixteen, from one at four to four", () => {
    expect([1, 3, 4, 16, 32, 63, 64, 128, 512].map(interactiveReserve)).toEqual([0, 0, 1, 1, 2, 3, 4, 4, 4]);
  });

  it("keeps nothing free for a request that gives the reserve back (a batch at risk)", async () => {
    const pool = new ResourcePool(["a", "b", "c", "d"], { reserve: 1, warmMs: 200 });
    pool.release(await pool.acquire({ lane: "interactive", keepReserve: false }));
    const all = [
      await pool.acquire(BATCH_WORK),
      await pool.acquire(BATCH_WORK),
      await pool.acquire(BATCH_WORK),
      await pool.acquire(BATCH_WORK),
    ];
    expect(all).toHaveLength(4);
    expect(pool.available).toBe(0);
  });

  it("counts the interactive requests a batch line should give way to, and puts a resumed line ahead of the rest", async () => {
    // Two items, both lent to batch lines: two lines could give way.
    const pool = new ResourcePool(["a", "b"]);
    const held = [await pool.acquire(BATCH_WORK), await pool.acquire(BATCH_WORK)];
    const order: string[] = [];
    const wait = async (name: string, lane: Lane, opts: { resumed?: boolean; keepReserve?: boolean; signal?: AbortSignal } = {}) => {
      const item = await pool.acquire({ lane, keepReserve: opts.keepReserve }, opts.signal, { resumed: opts.resumed });
      order.push(name);
      pool.release(item);
    };
    const gone = new AbortController();
    const all = [
      wait("batch", "batch"),
      wait("resumed", "batch", { resumed: true }),
      wait("interactive", "interactive"),
      // A request that gives the reserve back (a batch at risk) takes no batch line's item.
      wait("at risk", "interactive", { keepReserve: false }),
      wait("gone", "interactive", { signal: gone.signal }).catch(() => order.push("aborted")),
    ];
    expect(pool.preempting).toBe(2);
    gone.abort();
    await new Promise((r) => setImmediate(r));
    expect(pool.preempting).toBe(1);
    for (const item of held) pool.release(item);
    await Promise.all(all);
    expect(pool.preempting).toBe(0);
    expect(order).toEqual(["aborted", "interactive", "at risk", "resumed", "batch"]);
  });

  it("leaves batch work its floor while its lines wait: the lane's requests past the rest wait behind them", async () => {
    const pool = new ResourcePool(["a", "b", "c", "d"], { batchFloor: 1 });
    const lines = [
      await pool.acquire(BATCH_WORK),
      await pool.acquire(BATCH_WORK),
      await pool.acquire(BATCH_WORK),
      await pool.acquire(BATCH_WORK),
    ];
    const got: string[] = [];
    const ask = (name: string, borrower: Borrower) =>
      pool.acquire(borrower).then((item) => {
        got.push(name);
        return item;
      });
    const requests = [1, 2, 3, 4].map((n) => ask(`request ${n}`, INTERACTIVE));
    const waitingLine = ask("line", BATCH_WORK);
    // Four requests wait, but the lane may take three of the four items: three lines are asked to give way.
    expect(pool.preempting).toBe(3);
    for (const item of lines.slice(0, 3)) pool.release(item);
    await Promise.all(requests.slice(0, 3));
    expect(pool.preempting).toBe(0);
    // The lane holds all but the floor: a line's item goes to the line waiting, not to the fourth request.
    pool.release(lines[3]);
    expect(await waitingLine).toBe(lines[3]);
    expect(got).toEqual(["request 1", "request 2", "request 3", "line"]);
    // A request that ends passes its item to the next request; with no batch work waiting, the lane may take all.
    pool.release(await requests[0], "interactive");
    expect(await requests[3]).toBe(lines[0]);
    pool.release(await waitingLine);
    expect(await ask("request 5", INTERACTIVE)).toBe(lines[3]);
    expect(pool.available).toBe(0);
  });

  it("keeps no more of its reserve free than the lane may take, and at its cap serves waiting lines first", async () => {
    const pool = new ResourcePool(["a", "b", "c", "d"], { reserve: 2, warmMs: 60_000, batchFloor: 3 });
    pool.release(await pool.acquire(INTERACTIVE), "interactive");
    // The lane is warm but may hold one item while batch work waits: one is kept free, not two.
    const lines: string[] = [];
    for (let i = 0; i < 3; i++) void pool.acquire(BATCH_WORK).then((item) => lines.push(item));
    await new Promise((r) => setImmediate(r));
    expect(lines).toHaveLength(3);
    expect(pool.available).toBe(1);
    const waiting = pool.acquire(BATCH_WORK);
    const request = await pool.acquire(INTERACTIVE);
    expect(request).toBe("d");
    // At its cap, with lines waiting, the lane's next request waits behind them; its own item comes back to it.
    const next = pool.acquire(INTERACTIVE);
    pool.release(lines[0]);
    expect(await waiting).toBe(lines[0]);
    pool.release(request, "interactive");
    expect(await next).toBe(request);
  });

  it("gives a line that gave way its item back when the lane reached its cap while it was giving way", async () => {
    const pool = new ResourcePool(["a", "b", "c", "d"], { batchFloor: 1 });
    const requests = [await pool.acquire(INTERACTIVE), await pool.acquire(INTERACTIVE)];
    const [first, second] = [await pool.acquire(BATCH_WORK), await pool.acquire(BATCH_WORK)];
    const third = pool.acquire(INTERACTIVE);
    const fourth = pool.acquire(INTERACTIVE);
    // Two requests wait, and the lane may take one more item: one line is asked to give way.
    expect(pool.preempting).toBe(1);
    // Before that line gives its item back, the other line ends and its item brings the lane to its cap.
    pool.release(first);
    expect(await third).toBe(first);
    // The line waits again before giving its item back (SequencePool.resume): the item comes back to it.
    const back = pool.acquire(BATCH_WORK, undefined, { resumed: true });
    pool.release(second);
    expect(await back).toBe(second);
    let served = false;
    void fourth.then(() => (served = true));
    await new Promise((r) => setImmediate(r));
    expect(served).toBe(false);
    pool.release(requests[0], "interactive");
    expect(await fourth).toBe(requests[0]);
  });

  it("sizes a sequence pool's batch floor at a quarter of its sequences, at least one of two", () => {
    expect([1, 2, 3, 4, 7, 8, 16, 64].map(batchFloor)).toEqual([0, 1, 1, 1, 1, 2, 4, 16]);
  });
});
