// The generation contexts of a model's LoRA adapters: node-llama-cpp applies adapters per context, so each adapter
// gets a sequence pool of its own over the same loaded weights, made when a request first names it, and kept within
// a memory budget: when another adapter's pool would not fit, the pool idle longest is closed (least recently used);
// while every other pool is busy, the request waits for one to go idle.
import type { RunShape } from "../../openai/backend.js";
import { engineClosed } from "../errors.js";
import type { LoraAdapter } from "../types.js";
import type { KvChoice } from "./kv-choice.js";
import type { SequencePool } from "./sequence-pool.js";

interface Entry {
  key: string;
  pool?: SequencePool;
  making?: Promise<SequencePool>;
  bytes: number;
  active: number;
  lastUsed: number;
}

export interface LoraPoolsOptions {
  /** Makes an adapter's pool, warmed up. */
  make: (adapter: LoraAdapter) => Promise<SequencePool>;
  /** Bytes one adapter's pool will take (its KV cache and the adapter's tensors). */
  bytesOf: (adapter: LoraAdapter) => Promise<number>;
  /** What all adapters' pools may take together; one pool is always allowed. */
  budgetBytes: number;
  log: (msg: string, fields?: Record<string, unknown>) => void;
}

const keyOf = (a: LoraAdapter) => `${a.path}\u0000${a.scale}`;

export class LoraPools {
  private readonly entries = new Map<string, Entry>();
  private readonly waiters = new Set<() => void>();
  private clock = 0;
  private closed = false;
  /** Adapter pools closed to make room for another. */
  evictions = 0;

  constructor(private readonly opts: LoraPoolsOptions) {}

  /** Adapters whose pools are open now. */
  get open(): string[] {
    return [...this.entries.values()].filter((e) => e.pool).map((e) => e.key.split("\u0000")[0]!);
  }

  async run<T>(adapter: LoraAdapter, fn: (pool: SequencePool) => Promise<T>): Promise<T> {
    const key = keyOf(adapter);
    if (this.closed) throw engineClosed();
    let entry = this.entries.get(key);
    if (!entry) {
      entry = { key, bytes: 0, active: 0, lastUsed: 0 };
      this.entries.set(key, entry);
    }
    entry.active++;
    entry.lastUsed = ++this.clock;
    try {
      const pool = await this.poolOf(entry, adapter);
      return await fn(pool);
    } finally {
      entry.active--;
      entry.lastUsed = ++this.clock;
      if (entry.active === 0) this.wake();
    }
  }

  /** One adapter's pool while it is open. */
  peek(adapter: LoraAdapter): SequencePool | undefined {
    return this.entries.get(keyOf(adapter))?.pool;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wake();
    const all = [...this.entries.values()];
    await Promise.allSettled(all.map((e) => e.making));
    await Promise.allSettled(all.map((e) => e.pool?.close()));
    this.entries.clear();
  }

  private poolOf(entry: Entry, adapter: LoraAdapter): Promise<SequencePool> {
    if (entry.pool) return Promise.resolve(entry.pool);
    entry.making ??= (async () => {
      try {
        const bytes = await this.opts.bytesOf(adapter);
        await this.makeRoom(entry, bytes);
        this.opts.log("adapter contexts made", { adapter: adapter.name, estimated_mb: Math.round(bytes / 2 ** 20) });
        entry.pool = await this.opts.make(adapter);
        return entry.pool;
      } catch (err) {
        entry.bytes = 0;
        this.wake();
        throw err;
      } finally {
        entry.making = undefined;
      }
    })();
    return entry.making;
  }

  private async makeRoom(entry: Entry, bytes: number): Promise<void> {
    for (;;) {
      if (this.closed) throw engineClosed();
      const others = [...this.entries.values()].filter((e) => e !== entry && (e.pool || e.making));
      const used = others.reduce((s, e) => s + e.bytes, 0);
      if (others.length === 0 || used + bytes <= this.opts.budgetBytes) {
        entry.bytes = bytes;
        return;
      }
      const idle = others.filter((e) => e.pool && e.active === 0).sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (idle) {
        this.opts.log("closing an idle adapter's contexts to make room", { adapter: idle.key.split("\u0000")[0] });
        const pool = idle.pool!;
        this.entries.delete(idle.key);
        this.evictions++;
        await pool.close();
        continue;
      }
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.waiters.delete(wake);
          resolve();
        };
        this.waiters.add(wake);
      });
    }
  }

  private wake() {
    for (const w of [...this.waiters]) w();
  }
}

type Source = Pick<KvChoice, "run" | "prepare" | "stats" | "switches" | "current" | "close">;

/** One adapter's pools as the engine sees its sequence pool (kv-choice.ts): runs go to the adapter's own contexts. */
export function adapterSource(pools: LoraPools, adapter: LoraAdapter, base: KvChoice): Source {
  const zero = { steps: 0, sequences: 0, tokens: 0, waitTurns: 0, microBatches: 0, copies: 0, copiedTokens: 0, yields: 0, reevaluated: 0 };
  return {
    run: (fn) => pools.run(adapter, fn),
    // The adapter's contexts keep the cache they were made with: a switch would close them under other runs.
    prepare: (_shape: RunShape) => Promise.resolve(),
    stats: () => {
      const pool = pools.peek(adapter);
      if (!pool) return zero;
      const b = pool.batchStats;
      return {
        ...b,
        copies: pool.copyStats.copies,
        copiedTokens: pool.copyStats.tokens,
        yields: pool.yieldStats.yields,
        reevaluated: pool.yieldStats.tokens,
      };
    },
    switches: { toUnified: 0, toStreams: 0 },
    get current() {
      return pools.peek(adapter) ?? base.current;
    },
    // The pools belong to the base's engine, which closes them.
    close: () => Promise.resolve(),
  };
}
