import pino from "pino";
import { describe, expect, it } from "vitest";
import { PoolScheduler } from "../../api/control/pool-scheduler.js";

function captured() {
  const lines: Array<Record<string, any>> = [];
  const logger = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s)) });
  return { logger, lines };
}

const pools = (spot: number, dedicated: number) => ({ spot: { capacity: spot }, dedicated: { capacity: dedicated } });

describe("pool scheduler (simulated pools)", () => {
  it("fills spot first, then falls back to dedicated, then has nothing", () => {
    const { logger, lines } = captured();
    const s = new PoolScheduler(pools(2, 1), logger);
    const a = s.tryAcquire("a", { urgent: false })!;
    const b = s.tryAcquire("b", { urgent: false })!;
    const c = s.tryAcquire("c", { urgent: false })!;
    expect([a.pool, b.pool, c.pool]).toEqual(["spot", "spot", "dedicated"]);
    expect([a.fallback, c.fallback]).toEqual([false, true]);
    expect(s.tryAcquire("d", { urgent: false })).toBeUndefined();
    expect(s.status()).toEqual([
      { name: "spot", capacity: 2, in_use: 2, available: 0, preempted: 0, preemptions: 0, jobs: ["a", "b"] },
      { name: "dedicated", capacity: 1, in_use: 1, available: 0, preempted: 0, preemptions: 0, jobs: ["c"] },
    ]);
    expect(lines.some((l) => l.batch_id === "c" && /falls back to the dedicated pool/.test(l.msg))).toBe(true);
    expect(lines.some((l) => l.batch_id === "a" && l.pool === "spot" && /assigned/.test(l.msg))).toBe(true);
  });

  it("gives an urgent job dedicated first and spot when dedicated is taken", () => {
    const s = new PoolScheduler(pools(2, 1), pino({ level: "silent" }));
    expect(s.tryAcquire("u1", { urgent: true })!.pool).toBe("dedicated");
    const u2 = s.tryAcquire("u2", { urgent: true })!;
    expect(u2).toMatchObject({ pool: "spot", fallback: true });
  });

  it("frees a slot on release, once, and tells listeners", () => {
    const s = new PoolScheduler(pools(1, 0), pino({ level: "silent" }));
    let released = 0;
    s.onRelease(() => released++);
    const a = s.tryAcquire("a", { urgent: false })!;
    expect(s.tryAcquire("b", { urgent: false })).toBeUndefined();
    s.release(a);
    s.release(a);
    expect(released).toBe(1);
    expect(s.inUse).toBe(0);
    expect(s.tryAcquire("b", { urgent: false })!.pool).toBe("spot");
  });

  it("uses whatever capacity exists (dedicated only)", () => {
    const s = new PoolScheduler(pools(0, 1), pino({ level: "silent" }));
    expect(s.totalCapacity).toBe(1);
    expect(s.tryAcquire("a", { urgent: false })).toMatchObject({ pool: "dedicated", fallback: true });
  });

  it("places no job on slots lost to a preemption until their cooldown ends, then wakes the worker", async () => {
    const s = new PoolScheduler(pools(2, 1), captured().logger);
    let woken = 0;
    s.onRelease(() => woken++);
    s.lose("spot", 2, 30);
    expect(s.tryAcquire("a", { urgent: false })).toMatchObject({ pool: "dedicated", fallback: true });
    expect(s.tryAcquire("b", { urgent: false })).toBeUndefined();
    expect(s.status()[0]).toMatchObject({ capacity: 2, preempted: 2, available: 0 });
    await new Promise((r) => setTimeout(r, 60));
    expect(woken).toBe(1);
    expect(s.tryAcquire("b", { urgent: false })).toMatchObject({ pool: "spot" });
  });
});
