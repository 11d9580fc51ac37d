// The router's bookkeeping (memory budget, eviction, idle unload, failed loads) with backends that only record
// their lifecycle; tests/api/models.int.test.ts runs it on real engines.
import { describe, expect, it } from "vitest";
import { ModelRegistry, type ModelSpec } from "../../backends/registry.js";
import { ModelLoadError, ModelRouter } from "../../backends/router.js";
import type { InferenceBackend } from "../../openai/backend.js";

const local = (name: string): ModelSpec => ({ name, aliases: [], backend: { kind: "local", path: `/m/${name}.gguf` } });

function setup(opts: {
  budget: number;
  sizes: Record<string, number>;
  idleMs?: number;
  failing?: Set<string>;
  /** A load that takes until this settles, or until its signal aborts when `stoppable`. */
  slow?: Promise<void>;
  stoppable?: boolean;
}) {
  const events: string[] = [];
  const registry = new ModelRegistry(Object.keys(opts.sizes).map(local));
  const router = new ModelRouter({
    registry,
    memoryBudgetBytes: opts.budget,
    idleUnloadMs: opts.idleMs ?? 0,
    log: () => {},
    factory: {
      footprint: async (spec) => opts.sizes[spec.name],
      async local(spec, signal) {
        if (opts.failing?.has(spec.name)) throw new Error("bad file");
        if (opts.slow) {
          events.push(`loading ${spec.name}`);
          const stopped = () => new Promise<void>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
          await (opts.stoppable ? Promise.race([opts.slow, stopped()]) : opts.slow).catch((err) => {
            events.push(`load stopped ${spec.name}`);
            throw err;
          });
        }
        events.push(`load ${spec.name}`);
        return {
          info: { model: spec.name },
          close: async () => void events.push(`unload ${spec.name}`),
        } as unknown as InferenceBackend;
      },
      upstream: () => {
        throw new Error("none");
      },
    },
  });
  return { router, events };
}

describe("ModelRouter", () => {
  it("loads once for concurrent batches and keeps a model while it is used", async () => {
    const { router, events } = setup({ budget: 100, sizes: { a: 10 } });
    const [x, y] = await Promise.all([router.acquire("a"), router.acquire("a")]);
    expect(x.backend).toBe(y.backend);
    expect(events).toEqual(["load a"]);
    expect(router.status()).toEqual([{ name: "a", kind: "local", state: "loaded", batches: 2, bytes: 10 }]);
    x.release();
    y.release();
    expect(router.status()[0]).toMatchObject({ state: "loaded", batches: 0 });
  });

  it("unloads the least recently used idle model to make room, and waits while the others are busy", async () => {
    const { router, events } = setup({ budget: 100, sizes: { a: 60, b: 30, c: 50 } });
    const a = await router.acquire("a");
    const b = await router.acquire("b");
    b.release();
    // c needs 50: b is idle and goes, a is busy and stays, still 110 > 100: c waits for a.
    let cLoaded = false;
    const c = router.acquire("c").then((l) => {
      cLoaded = true;
      return l;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(cLoaded).toBe(false);
    expect(events).toEqual(["load a", "load b", "unload b"]);
    a.release();
    (await c).release();
    expect(events).toEqual(["load a", "load b", "unload b", "unload a", "load c"]);
  });

  it("runs a model bigger than the budget alone rather than never", async () => {
    const { router, events } = setup({ budget: 10, sizes: { a: 50 } });
    (await router.acquire("a")).release();
    expect(events).toEqual(["load a"]);
  });

  it("unloads a model left idle for idleUnloadMs", async () => {
    const { router, events } = setup({ budget: 100, sizes: { a: 10 }, idleMs: 30 });
    (await router.acquire("a")).release();
    await new Promise((r) => setTimeout(r, 80));
    expect(events).toEqual(["load a", "unload a"]);
    expect(router.isLoaded("a")).toBe(false);
  });

  it("fails a batch whose model cannot load with ModelLoadError, and tries again for the next", async () => {
    const failing = new Set(["a"]);
    const { router, events } = setup({ budget: 100, sizes: { a: 10 }, failing });
    const err = await router.acquire("a").catch((e) => e);
    expect(err).toBeInstanceOf(ModelLoadError);
    expect(err.message).toBe("The model 'a' could not be loaded: bad file");
    failing.clear();
    (await router.acquire("a")).release();
    expect(events).toEqual(["load a"]);
  });

  it("gives up waiting with the caller's abort, without stopping the load for others", async () => {
    const { router } = setup({ budget: 100, sizes: { a: 10 } });
    const ctl = new AbortController();
    ctl.abort(new Error("cancelled"));
    await expect(router.acquire("a", ctl.signal)).rejects.toThrow("cancelled");
    (await router.acquire("a")).release();
    expect(router.isLoaded("a")).toBe(true);
  });

  it("begins no load for a caller stopped before it asks, and its close leaves nothing unhandled", async () => {
    // A Ctrl-C during the runner's start: the load it never needed used to fail after the close, unhandled (exit 1).
    const { router, events } = setup({ budget: 100, sizes: { a: 10 } });
    const ctl = new AbortController();
    ctl.abort(new Error("interrupted"));
    await expect(router.acquire("a", ctl.signal)).rejects.toThrow("interrupted");
    await router.close();
    await new Promise((r) => setTimeout(r, 20));
    expect(events).toEqual([]);
    expect(router.status()[0]).toMatchObject({ state: "unloaded", batches: 0 });
  });

  it("stops a load in progress when it closes, and the caller waiting hears why", async () => {
    let never = () => {};
    const { router, events } = setup({ budget: 100, sizes: { a: 10 }, slow: new Promise((r) => (never = r)), stoppable: true });
    const waiting = router.acquire("a").catch((e) => e);
    while (!events.includes("loading a")) await new Promise((r) => setTimeout(r, 1));
    await router.close();
    const err = await waiting;
    expect(err).toBeInstanceOf(ModelLoadError);
    expect(err.message).toBe("The model 'a' could not be loaded: the service is shutting down");
    expect(events).toEqual(["loading a", "load stopped a"]);
    never();
  });

  it("takes down a model whose load ended after the close, however long the close had to wait for it", async () => {
    let loaded = () => {};
    const { router, events } = setup({ budget: 100, sizes: { a: 10 }, slow: new Promise((r) => (loaded = r)) });
    const waiting = router.acquire("a").catch((e) => e);
    while (!events.includes("loading a")) await new Promise((r) => setTimeout(r, 1));
    const closed = router.close();
    loaded();
    await closed;
    expect(await waiting).toBeInstanceOf(ModelLoadError);
    expect(events).toEqual(["loading a", "load a", "unload a"]);
    expect(router.isLoaded("a")).toBe(false);
  });

  it("counts a model's room as taken the moment it is granted, so two loads at once do not both fit", async () => {
    const { router, events } = setup({ budget: 100, sizes: { a: 60, b: 60 } });
    const [a, b] = [router.acquire("a"), router.acquire("b")];
    const first = await Promise.race([a, b]);
    await new Promise((r) => setTimeout(r, 20));
    expect(events).toHaveLength(1);
    first.release();
    (await (first === (await a) ? b : a)).release();
    expect(events).toEqual(expect.arrayContaining(["load a", "load b"]));
    expect(events[1]).toMatch(/^unload /);
  });
});
