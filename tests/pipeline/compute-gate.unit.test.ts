import { describe, expect, it } from "vitest";
import { ComputeGate } from "../../pipeline/compute-gate.js";

describe("ComputeGate", () => {
  it("lets in as many as it has places, the rest in the order they came as places are given up", async () => {
    const gate = new ComputeGate(2);
    const a = await gate.acquire();
    const b = await gate.acquire();
    const order: string[] = [];
    const inTurn = (name: string) =>
      gate.acquire().then((release) => {
        order.push(name);
        return release;
      });
    const c = inTurn("c");
    const d = inTurn("d");
    await Promise.resolve();
    expect(order).toEqual([]);
    a();
    a(); // a second call gives up nothing more
    const releaseC = await c;
    expect(order).toEqual(["c"]);
    b();
    const releaseD = await d;
    expect(order).toEqual(["c", "d"]);
    releaseC();
    releaseD();
    // Both places free again: two more get in at once.
    await Promise.all([gate.acquire(), gate.acquire()]);
  });

  it("a waiter whose signal aborts leaves with its reason and takes no place", async () => {
    const gate = new ComputeGate(1);
    const first = await gate.acquire();
    const ac = new AbortController();
    const gone = gate.acquire(ac.signal);
    const next = gate.acquire();
    ac.abort(new Error("drained"));
    await expect(gone).rejects.toThrow("drained");
    first();
    const release = await next;
    release();
    await expect(gate.acquire(AbortSignal.abort(new Error("already")))).rejects.toThrow("already");
    (await gate.acquire())();
  });
});
