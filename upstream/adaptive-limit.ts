// How many requests an upstream gets at once, found by watching it (AIMD, as TCP finds a link's rate):
// - slow start: the limit grows by one per success (doubling per round trip) until the first sign of overload;
// - then additive increase: one more per limit's worth of successes (one per round trip);
// - multiplicative decrease on overload (429, 5xx, a timeout, a reset) and when latency climbs well above the
//   best seen (requests queueing inside the upstream), at most once per round trip, so one burst of failures
//   of requests sent together counts once.
// Bounded by the configured min and max. Waiters are served in order, an interactive request's (a client holds
// its connection open) ahead of every batch line's.
import Denque from "denque";
import type { Lane } from "../openai/backend.js";

export interface LimitOptions {
  min: number;
  max: number;
  /** Where the limit starts (default: min). */
  initial?: number;
  /** Latency above this multiple of the best smoothed latency counts as overload (default 2.5). */
  latencyTolerance?: number;
  /** Multiplier on overload (default 0.7). */
  backoff?: number;
  now?: () => number;
}

export type Outcome = "success" | "overload" | "error";

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
  signal?: AbortSignal;
  onAbort?: () => void;
  interactive: boolean;
}

export interface LimitStats {
  limit: number;
  inFlight: number;
  waiting: number;
  /** Times the limit was cut, by cause. */
  decreases: { overload: number; latency: number };
  /** Smoothed latency of successful requests, and the best seen (ms). */
  latencyMs: number;
  bestLatencyMs: number;
}

export class AdaptiveLimit {
  private value: number;
  private inFlight = 0;
  private readonly waiters = new Denque<Waiter>();
  private slowStart = true;
  /** Requests started before this moment belong to the round trip that was already answered by a cut. */
  private cutAt = Number.NEGATIVE_INFINITY;
  private smoothed = 0;
  private best = Number.POSITIVE_INFINITY;
  private readonly decreases = { overload: 0, latency: 0 };
  private readonly now: () => number;

  constructor(private readonly opts: LimitOptions) {
    if (!(opts.min >= 1 && opts.max >= opts.min)) throw new RangeError(`need 1 <= min <= max, got ${opts.min}..${opts.max}`);
    this.value = Math.min(opts.max, Math.max(opts.min, opts.initial ?? opts.min));
    this.now = opts.now ?? (() => performance.now());
  }

  get limit(): number {
    return Math.floor(this.value);
  }

  stats(): LimitStats {
    return {
      limit: this.limit,
      inFlight: this.inFlight,
      waiting: this.waiters.length,
      decreases: { ...this.decreases },
      latencyMs: this.smoothed,
      bestLatencyMs: Number.isFinite(this.best) ? this.best : 0,
    };
  }

  /**
   * Waits for room; returns the start time to hand back to `release`. Rejects with the signal's reason on abort.
   * The interactive lane waits ahead of the batch lane.
   */
  async acquire(signal?: AbortSignal, lane: Lane = "batch"): Promise<number> {
    const interactive = lane === "interactive";
    signal?.throwIfAborted();
    if (this.inFlight < this.limit && this.waiters.isEmpty()) {
      this.inFlight++;
      return this.now();
    }
    await new Promise<void>((resolve, reject) => {
      const w: Waiter = { resolve, reject, signal, interactive };
      if (signal) {
        w.onAbort = () => {
          const i = this.indexOf(w);
          if (i >= 0) this.waiters.removeOne(i);
          reject(signal.reason);
        };
        signal.addEventListener("abort", w.onAbort, { once: true });
      }
      if (interactive) this.waiters.splice(this.firstBatchWaiter(), 0, w);
      else this.waiters.push(w);
    });
    return this.now();
  }

  /** A request that got room ended: `startedAt` from acquire. */
  release(startedAt: number, outcome: Outcome): void {
    this.inFlight--;
    const t = this.now();
    if (outcome === "success") this.onSuccess(startedAt, t - startedAt);
    else if (outcome === "overload") this.cut(startedAt, "overload");
    this.dispatch();
  }

  private onSuccess(startedAt: number, latency: number) {
    this.smoothed = this.smoothed === 0 ? latency : 0.8 * this.smoothed + 0.2 * latency;
    this.best = Math.min(this.best, this.smoothed);
    if (this.smoothed > this.best * (this.opts.latencyTolerance ?? 2.5) && this.value > this.opts.min) {
      this.cut(startedAt, "latency");
      // The best seen drifts up slowly, so a lasting change in the work (longer answers) is not overload forever.
      this.best *= 1.05;
      return;
    }
    this.value = Math.min(this.opts.max, this.value + (this.slowStart ? 1 : 1 / this.value));
  }

  private cut(startedAt: number, cause: "overload" | "latency") {
    if (startedAt < this.cutAt) return;
    this.slowStart = false;
    this.cutAt = this.now();
    this.decreases[cause]++;
    this.value = Math.max(this.opts.min, this.value * (this.opts.backoff ?? 0.7));
  }

  private dispatch() {
    while (this.inFlight < this.limit && !this.waiters.isEmpty()) {
      const w = this.waiters.shift()!;
      if (w.onAbort) w.signal?.removeEventListener("abort", w.onAbort);
      this.inFlight++;
      w.resolve();
    }
  }

  private firstBatchWaiter(): number {
    for (let i = 0; i < this.waiters.length; i++) if (!this.waiters.peekAt(i)!.interactive) return i;
    return this.waiters.length;
  }

  private indexOf(w: Waiter): number {
    for (let i = 0; i < this.waiters.length; i++) if (this.waiters.peekAt(i) === w) return i;
    return -1;
  }
}
