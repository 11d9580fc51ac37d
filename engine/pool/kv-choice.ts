// Which KV cache the generation contexts keep, chosen per batch run where KV_UNIFIED is "auto" (the patched build).
// A unified cache (one buffer for all of a context's sequences) makes a prefix copy free and a decode one pass over
// the weights; it won on every workload whose lines share openings and lost on long lines that share nothing,
// whose attention then reads cells scattered through one large buffer (docs/performance.md). The batch runner
// knows which kind of batch it holds before its first line starts (pipeline/schedule.ts), and contexts are cheap to
// make again while nothing runs on them, so each run gets the cache that suits it.
import type { RunShape } from "../../openai/backend.js";
import type { SequencePool } from "./sequence-pool.js";

/** A unified cache suits a run where at least this share of the lines open like another line. */
export const UNIFIED_FAMILY_SHARE = 0.5;

/** Whether a run of this shape should have a unified cache; undefined when it is too small to be worth a switch. */
export function unifiedSuits(shape: RunShape, sequences: number): boolean | undefined {
  // A run that fills the sequences at most once ends before a switch would pay for itself (contexts are made again
  // and warmed up: a fraction of a second on `small`).
  if (shape.lines <= sequences) return undefined;
  return shape.familyLines >= UNIFIED_FAMILY_SHARE * shape.lines;
}

type Stats = SequencePool["batchStats"] & { copies: number; copiedTokens: number; yields: number; reevaluated: number };

/**
 * Holds the sequence pool and makes it again with the other cache when a run asks and no request is on it. Requests
 * enter through `run`, which waits while the pool is being made again; a switch waits for nothing, it is skipped when
 * any request runs (the runs in flight keep the cache they started with).
 */
export class KvChoice {
  private active = 0;
  private switching: Promise<void> | null = null;
  private readonly retired: Stats = {
    steps: 0,
    sequences: 0,
    tokens: 0,
    waitTurns: 0,
    microBatches: 0,
    copies: 0,
    copiedTokens: 0,
    yields: 0,
    reevaluated: 0,
  };
  readonly switches = { toUnified: 0, toStreams: 0 };

  constructor(
    private pool: SequencePool,
    /** Makes a pool with the given cache, warmed up; null when switching is off (KV_UNIFIED true or false). */
    private readonly make: ((unified: boolean) => Promise<SequencePool>) | null,
    private readonly log: (msg: string, fields?: Record<string, unknown>) => void = () => {},
  ) {}

  get current(): SequencePool {
    return this.pool;
  }

  get auto(): boolean {
    return this.make !== null;
  }

  async run<T>(fn: (pool: SequencePool) => Promise<T>): Promise<T> {
    while (this.switching) await this.switching;
    this.active++;
    try {
      return await fn(this.pool);
    } finally {
      this.active--;
    }
  }

  /** Switches to the cache that suits `shape` when switching is on, it differs, and nothing runs. */
  async prepare(shape: RunShape): Promise<void> {
    while (this.switching) await this.switching;
    const unified = this.make ? unifiedSuits(shape, this.pool.size) : undefined;
    if (unified === undefined || unified === this.pool.kvUnified || this.active > 0) return;
    this.switching = this.replace(unified).finally(() => {
      this.switching = null;
    });
    await this.switching;
  }

  async close(): Promise<void> {
    while (this.switching) await this.switching.catch(() => {});
    await this.pool.close();
  }

  /** Counters over every pool this engine had. */
  stats(): Stats {
    const b = this.pool.batchStats;
    const r = this.retired;
    return {
      steps: r.steps + b.steps,
      sequences: r.sequences + b.sequences,
      tokens: r.tokens + b.tokens,
      waitTurns: r.waitTurns + b.waitTurns,
      microBatches: r.microBatches + b.microBatches,
      copies: r.copies + this.pool.copyStats.copies,
      copiedTokens: r.copiedTokens + this.pool.copyStats.tokens,
      yields: r.yields + this.pool.yieldStats.yields,
      reevaluated: r.reevaluated + this.pool.yieldStats.tokens,
    };
  }

  private async replace(unified: boolean): Promise<void> {
    const started = performance.now();
    const old = this.pool;
    const counted = this.stats();
    await old.close();
    let next: SequencePool;
    try {
      next = await this.make!(unified);
    } catch (err) {
      // The other cache would not fit (or failed): the engine goes on with the one it had.
      this.log("could not switch the KV cache; keeping the previous one", {
        unified,
        error: err instanceof Error ? err.message : String(err),
      });
      next = await this.make!(old.kvUnified);
    }
    this.pool = next;
    Object.assign(this.retired, counted);
    if (next.kvUnified !== unified) return;
    unified ? this.switches.toUnified++ : this.switches.toStreams++;
    this.log(`KV cache: ${unified ? "unified" : "a stream per sequence"} for the next run`, {
      ms: Math.round(performance.now() - started),
      sequences: this.pool.size,
    });
  }
}
