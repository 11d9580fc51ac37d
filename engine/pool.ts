// A fair pool of interchangeable resources (context sequences, embedding contexts).
// Requests that find nothing free wait in FIFO order, so a long batch cannot starve an early request.
import Denque from "denque";
import { abortError, engineClosed } from "./errors.js";

interface Waiter<T> {
  resolve: (item: T) => void;
  reject: (err: unknown) => void;
  /** Set once resolved, rejected or aborted; such waiters are skipped. */
  done: boolean;
}

/** Picks which free item a request gets, by index into `free`. */
export type Chooser<T> = (free: readonly T[]) => number;

export class ResourcePool<T> {
  private readonly free: T[];
  private readonly waiters = new Denque<Waiter<T>>();
  private closed = false;

  constructor(items: readonly T[]) {
    this.free = [...items];
  }

  get available(): number {
    return this.free.length;
  }

  /**
   * Take an item. With several free, `choose` picks one (default: the one released last, whose state is
   * the most likely to be reused). Rejects with an AbortError if `signal` aborts while waiting.
   */
  acquire(signal?: AbortSignal, choose?: Chooser<T>): Promise<T> {
    if (this.closed) return Promise.reject(engineClosed());
    if (signal?.aborted) return Promise.reject(abortError(signal));
    if (this.free.length > 0) {
      const index = choose ? choose(this.free) : this.free.length - 1;
      const [item] = this.free.splice(index >= 0 && index < this.free.length ? index : this.free.length - 1, 1);
      return Promise.resolve(item);
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        if (waiter.done) return;
        waiter.done = true;
        reject(abortError(signal));
      };
      const waiter: Waiter<T> = {
        done: false,
        resolve: (item) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(item);
        },
        reject: (err) => {
          signal?.removeEventListener("abort", onAbort);
          reject(err);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  /** Give an item back: to the longest-waiting request, else to the free list. */
  release(item: T): void {
    if (this.closed) return;
    while (!this.waiters.isEmpty()) {
      const waiter = this.waiters.shift()!;
      if (waiter.done) continue;
      waiter.done = true;
      waiter.resolve(item);
      return;
    }
    this.free.push(item);
  }

  /** Refuse new requests and fail the waiting ones; items still out are not tracked further. */
  close(): T[] {
    this.closed = true;
    while (!this.waiters.isEmpty()) {
      const waiter = this.waiters.shift()!;
      if (waiter.done) continue;
      waiter.done = true;
      waiter.reject(engineClosed());
    }
    return this.free.splice(0);
  }
}
