import { describe, expect, it } from "vitest";
import { AdaptiveLimit } from "../../upstream/adaptive-limit.js";

/** A limit on a hand-driven clock. */
function limitAt(opts: { min: number; max: number; initial?: number }) {
  let t = 0;
  const limit = new AdaptiveLimit({ ...opts, now: () => t });
  return { limit, advance: (ms: number) => (t += ms) };
}

/** One round trip: fill the limit, let every request take `ms`, end them with `outcome`. */
async function roundTrip(l: ReturnType<typeof limitAt>, ms: number, outcome: "success" | "overload" = "success") {
  const starts = await Promise.all(Array.from({ length: l.limit.limit }, () => l.limit.acquire()));
  l.advance(ms);
  for (const s of starts) l.limit.release(s, outcome);
}

describe("AdaptiveLimit", () => {
  it("doubles per round trip in slow start, up to max", async () => {
    const l = limitAt({ min: 1, max: 20, initial: 2 });
    const seen = [l.limit.limit];
    for (let i = 0; i < 5; i++) {
      await roundTrip(l, 100);
      seen.push(l.limit.limit);
    }
    expect(seen).toEqual([2, 4, 8, 16, 20, 20]);
  });

  it("cuts once per round trip on overload, then grows by about one per round trip", async () => {
    const l = limitAt({ min: 1, max: 64, initial: 32 });
    await roundTrip(l, 100, "overload");
    // 32 failures of one round trip count once.
    expect(l.limit.limit).toBe(22);
    expect(l.limit.stats().decreases.overload).toBe(1);
    await roundTrip(l, 100);
    expect(l.limit.limit).toBe(23);
    await roundTrip(l, 100);
    expect(l.limit.limit).toBe(24);
  });

  it("cuts when latency climbs well above the best seen (requests queueing upstream)", async () => {
    const l = limitAt({ min: 1, max: 64, initial: 8 });
    await roundTrip(l, 100);
    expect(l.limit.limit).toBe(16);
    for (let i = 0; i < 6 && l.limit.stats().decreases.latency === 0; i++) await roundTrip(l, 1000);
    expect(l.limit.stats().decreases.latency).toBeGreaterThan(0);
    expect(l.limit.limit).toBeLessThan(32);
  });

  it("never leaves its bounds", async () => {
    const l = limitAt({ min: 3, max: 5, initial: 4 });
    for (let i = 0; i < 10; i++) await roundTrip(l, 10, "overload");
    expect(l.limit.limit).toBe(3);
    for (let i = 0; i < 50; i++) await roundTrip(l, 10);
    expect(l.limit.limit).toBe(5);
  });

  it("queues beyond the limit in order, and a waiter's abort takes it out", async () => {
    const l = limitAt({ min: 1, max: 1 });
    const first = await l.limit.acquire();
    const order: string[] = [];
    const ctl = new AbortController();
    const aborted = l.limit.acquire(ctl.signal).then(() => order.push("aborted"));
    const second = l.limit.acquire().then((s) => {
      order.push("second");
      return s;
    });
    ctl.abort(new Error("cancelled"));
    await expect(aborted).rejects.toThrow("cancelled");
    expect(l.limit.stats()).toMatchObject({ inFlight: 1, waiting: 1 });
    l.limit.release(first, "success");
    l.limit.release(await second, "success");
    expect(order).toEqual(["second"]);
    expect(l.limit.stats()).toMatchObject({ inFlight: 0, waiting: 0 });
  });

  it("serves an interactive request's wait ahead of the batch lines', in order among each", async () => {
    const l = limitAt({ min: 1, max: 1, initial: 1 });
    const held = await l.limit.acquire();
    const order: string[] = [];
    const served: number[] = [];
    const wait = (name: string, interactive: boolean) =>
      l.limit.acquire(undefined, interactive ? "interactive" : "batch").then((s) => {
        order.push(name);
        served.push(s);
      });
    const waits = [wait("batch 1", false), wait("batch 2", false), wait("interactive 1", true), wait("interactive 2", true)];
    l.limit.release(held, "success");
    // Each one served ends before the next may start (the limit is one).
    for (let i = 0; i < waits.length; i++) {
      await new Promise((r) => setTimeout(r, 0));
      l.limit.release(served[i], "success");
    }
    await Promise.all(waits);
    expect(order).toEqual(["interactive 1", "interactive 2", "batch 1", "batch 2"]);
  });
});
