// A fair pool of interchangeable resources (context sequences, embedding contexts).
// Requests that find nothing free wait in FIFO order, so a long batch cannot starve an early request; a waiter
// may say how well a given item suits it (a sequence whose cache holds its prompt's prefix), and a released
// item then goes to the waiter it suits best, as SGLang schedules by longest cached prefix, within a bound on
// how often the oldest waiter is passed over. A request of the interactive lane waits ahead of the batch lane's,
// and while that lane is warm (a request of it came within the last WARM_MS) a pool given a reserve keeps that
// many items free of batch work, so the next interactive request starts at once instead of waiting for a batch
// line to end: batch lines run in step and end together, so that wait is most of a line's length. The reserve is made
// of the items the lane gave back last (`laneKept`), so it keeps their state too: a sequence's cache holds the lane's
// last prompts, and the next request of the same family (a system prompt, a chat's history) evaluates only what is new,
// as it would on an idle engine; batch work takes the items the lane needs least. Past the reserve,
// an interactive request waiting is counted (`preempting`), and the sequence pool has a batch line give its item up
// at its next token; that line then waits ahead of the batch lines not begun. A pool given a batch floor caps the lane
// at the other items: no line gives way once the lane holds them, and while batch work waits the lane's requests
// past them wait behind it and its items go to it, so interactive load that fills the machine slows a batch and never
// stops it.
// Each acquire is told its borrower (engine/types.ts): its lane, whether it keeps the reserve, who hears it begin.
import Denque from "denque";
import { abortError, engineClosed } from "../errors.js";
import type { Borrower } from "../types.js";

interface Waiter<T> {
  resolve: (item: T) => void;
  reject: (err: unknown) => void;
  /** Set once resolved, rejected or aborted; such waiters are skipped. */
  done: boolean;
  affinity?: Affinity<T>;
  /** Times a later waiter was served first while this one was the oldest. */
  passedOver: number;
  /** Of the interactive lane: it waits ahead of every batch waiter, in FIFO order among its own. */
  interactive: boolean;
  /** A batch line that gave its item to an interactive request: it waits ahead of the batch lines not begun. */
  resumed: boolean;
  /** An interactive request that may take a batch line's item (`preempting`); not while a batch is at risk. */
  preempts: boolean;
}

/** The order waiters are served in: interactive requests, then batch lines that gave their item to one, then the rest. */
const BATCH = 2;
const rank = (w: Pick<Waiter<unknown>, "interactive" | "resumed">): number => (w.interactive ? 0 : w.resumed ? 1 : BATCH);

/** How well an item suits a request (higher is better; equal scores keep FIFO order). */
export type Affinity<T> = (item: T) => number;

/** Waiters, from the oldest, that a released item is matched against. */
export const AFFINITY_WINDOW = 256;
/** The oldest waiter is served after being passed over this often: a waiter's delay stays bounded. */
export const MAX_PASSED_OVER = 32;

/** Picks which free item a request gets, by index into `free`. */
export type Chooser<T> = (free: readonly T[]) => number;

/** How a borrower picks among items, beside its lane. */
export interface Preference<T> {
  /** With several free, which one (default: the one released last, whose state is the most likely to be reused). */
  choose?: Chooser<T>;
  /** While it waits, how well each released item suits it (see release). */
  affinity?: Affinity<T>;
  /** A batch line taking an item back after giving one to an interactive request: it waits ahead of the other batch work. */
  resumed?: boolean;
}

/** How long the interactive lane stays warm after its last request: its reserve is kept free that long. */
export const WARM_MS = 10_000;

export interface PoolOptions {
  /** Items kept free of batch work while the interactive lane is warm (for `warmMs` after its last request). */
  reserve?: number;
  warmMs?: number;
  /** Items the interactive lane leaves batch work: no batch line gives way once the lane holds the others. */
  batchFloor?: number;
}

export class ResourcePool<T> {
  /** Items nobody holds, each lane's in the order they came back: batch work's, then the interactive lane's (`laneKept`). */
  private readonly free: T[];
  /** Free items the interactive lane gave back last: the reserve is made of them while the lane is warm. */
  private readonly laneKept = new Set<T>();
  private readonly waiters = new Denque<Waiter<T>>();
  private closed = false;
  private warmUntil = 0;
  private cooling: NodeJS.Timeout | undefined;
  private preemptors = 0;
  /** Items lent to the interactive lane now. */
  private readonly laneLent = new Set<T>();
  private readonly reserve: number;
  private readonly warmMs: number;
  /** The most items the interactive lane holds while batch work waits. */
  private readonly laneCap: number;

  constructor(items: readonly T[], { reserve = 0, warmMs = WARM_MS, batchFloor = 0 }: PoolOptions = {}) {
    this.free = [...items];
    this.reserve = reserve;
    this.warmMs = warmMs;
    this.laneCap = Math.max(1, items.length - batchFloor);
  }

  /** Free items batch work may not take now: no more than the lane could still take under its cap. */
  private get held(): number {
    if (this.reserve === 0 || performance.now() >= this.warmUntil) return 0;
    return Math.min(this.reserve, this.laneRoom);
  }

  /** Items the interactive lane may still take under its cap. */
  private get laneRoom(): number {
    return Math.max(0, this.laneCap - this.laneLent.size);
  }

  /** Where the first live batch waiter is (the end when there is none). */
  private firstBatchWaiter(): number {
    return this.firstWaiter((w) => !w.interactive);
  }

  /** An interactive request came: the reserve is kept for warmMs more, then handed to the batches' waiters. */
  private warm(): void {
    if (this.reserve === 0) return;
    this.warmUntil = performance.now() + this.warmMs;
    clearTimeout(this.cooling);
    this.cooling = setTimeout(() => {
      this.warmUntil = 0;
      this.lendSpare();
    }, this.warmMs + 1).unref();
  }

  /** Free items past those held go to the waiters, those the lane needs least first: the lane cooled. */
  private lendSpare(): void {
    for (let n = this.free.length - this.held; n > 0 && this.contended; n--) this.release(this.take(0));
  }

  /** Whether the interactive lane holds its most while batch work waits: its next request waits behind the batch. */
  private get laneFull(): boolean {
    return this.laneRoom === 0 && this.firstBatchWaiter() < this.waiters.length;
  }

  get available(): number {
    return this.free.length;
  }

  /**
   * Interactive requests waiting that a batch line should give its item to (sequence-pool.ts, mustYield): no more
   * than the lane may still take under its cap.
   */
  get preempting(): number {
    return Math.min(this.preemptors, this.laneRoom);
  }

  /** Whether a request waits for an item: the next one released goes to it at once. */
  get contended(): boolean {
    for (let i = 0; i < this.waiters.length; i++) if (!this.waiters.peekAt(i)!.done) return true;
    return false;
  }

  /**
   * Runs `work` on an item taken from the pool (as acquire takes it) and gives the item back however it ends;
   * what `work` throws comes out through `mapError` (the engine's errors).
   */
  async use<R>(
    borrower: Borrower,
    signal: AbortSignal | undefined,
    work: (item: T) => Promise<R>,
    mapError: (err: unknown) => unknown = (e) => e,
  ): Promise<R> {
    const item = await this.acquire(borrower, signal);
    try {
      if (signal?.aborted) throw abortError(signal);
      return await work(item);
    } catch (err) {
      throw mapError(err);
    } finally {
      this.release(item);
    }
  }

  /**
   * Take an item for `borrower`, in its lane; its onBegin is told as the item is lent. Rejects with an AbortError if
   * `signal` aborts while waiting.
   */
  acquire(borrower: Borrower, signal?: AbortSignal, { choose, affinity, resumed = false }: Preference<T> = {}): Promise<T> {
    if (this.closed) return Promise.reject(engineClosed());
    if (signal?.aborted) return Promise.reject(abortError(signal));
    const interactive = borrower.lane === "interactive";
    const keepsReserve = interactive && borrower.keepReserve !== false;
    const begins = borrower.onBegin;
    if (keepsReserve) this.warm();
    // Batch work chooses among the free items past the reserve: those the lane gave back longest ago, or never.
    const open = interactive ? (this.laneFull ? 0 : this.free.length) : this.free.length - this.held;
    if (open > 0) {
      const index = choose ? choose(interactive ? this.free : this.free.slice(0, open)) : open - 1;
      const item = this.take(index >= 0 && index < open ? index : open - 1);
      if (interactive) this.laneLent.add(item);
      begins?.();
      return Promise.resolve(item);
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        if (waiter.done) return;
        this.settle(waiter);
        reject(abortError(signal));
      };
      const waiter: Waiter<T> = {
        done: false,
        affinity,
        passedOver: 0,
        interactive,
        resumed: resumed && !interactive,
        preempts: keepsReserve,
        resolve: (item) => {
          signal?.removeEventListener("abort", onAbort);
          // Told as the item is lent, before the waiter's code runs: a caller never calls off a request that has it.
          begins?.();
          resolve(item);
        },
        reject: (err) => {
          signal?.removeEventListener("abort", onAbort);
          reject(err);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      if (waiter.preempts) this.preemptors++;
      // Behind the live waiters of its rank and above, ahead of those below it (a batch line: last, without a scan).
      if (rank(waiter) === BATCH) this.waiters.push(waiter);
      else
        this.waiters.splice(
          this.firstWaiter((w) => rank(w) > rank(waiter)),
          0,
          waiter,
        );
    });
  }

  /** Marks a waiter served, failed or gone. */
  private settle(waiter: Waiter<T>): void {
    waiter.done = true;
    if (waiter.preempts) this.preemptors--;
  }

  /** Where the first live waiter `behind` holds for is (the end when there is none). */
  private firstWaiter(behind: (w: Waiter<T>) => boolean): number {
    for (let i = 0; i < this.waiters.length; i++) {
      const w = this.waiters.peekAt(i)!;
      if (!w.done && behind(w)) return i;
    }
    return this.waiters.length;
  }

  /**
   * Give an item back, `lane` the lane that used it: to the waiter it suits best (the oldest on a tie, and the oldest
   * anyway once it has been passed over MAX_PASSED_OVER times), else to the free list.
   */
  release(item: T, lane: Borrower["lane"] = "batch"): void {
    if (this.closed) return;
    this.laneLent.delete(item);
    while (!this.waiters.isEmpty() && this.waiters.peekFront()!.done) this.waiters.shift();
    if (this.waiters.isEmpty()) {
      this.putFree(item, lane);
      return;
    }
    let [index, first] = this.bestWaiter(item);
    // The reserve refills first: batch work gets an item only while the reserve stays whole. An item the lane gave
    // back joins the reserve, and batch work gets the free item the lane needs least instead (the first: one batch
    // work gave back longest ago, else the one the lane gave back longest ago).
    if (!this.waiters.peekAt(index)!.interactive && (this.free.length < this.held || (lane === "interactive" && this.held > 0))) {
      this.putFree(item, lane);
      if (this.free.length <= this.held) return;
      item = this.take(0);
      [index, first] = this.bestWaiter(item);
    }
    if (index > first) this.waiters.peekAt(first)!.passedOver++;
    const waiter = index === 0 ? this.waiters.shift()! : this.waiters.removeOne(index)!;
    this.settle(waiter);
    if (waiter.interactive) this.laneLent.add(item);
    waiter.resolve(item);
  }

  /** A free item, last of those its lane gave back: the interactive lane's after batch work's. */
  private putFree(item: T, lane: Borrower["lane"]): void {
    if (lane === "interactive") {
      this.laneKept.add(item);
      this.free.push(item);
    } else this.free.splice(this.free.length - this.laneKept.size, 0, item);
  }

  /** Takes the free item at `index` out of the free list. */
  private take(index: number): T {
    const [item] = this.free.splice(index, 1);
    this.laneKept.delete(item);
    return item;
  }

  /**
   * Index of the live waiter `item` goes to, and of the first live waiter it was chosen among (the front one, which is
   * live, unless the interactive lane is at its cap: then the first batch waiter, if any).
   */
  private bestWaiter(item: T): [index: number, first: number] {
    const batchFirst = this.laneRoom === 0 ? this.firstBatchWaiter() : 0;
    const first = batchFirst < this.waiters.length ? batchFirst : 0;
    const oldest = this.waiters.peekAt(first)!;
    // An interactive request is served before any batch work, whatever a batch line's prompt shares, and a batch
    // line that gave its item to one before the lines not begun.
    if (oldest.passedOver >= MAX_PASSED_OVER || rank(oldest) < BATCH) return [first, first];
    let best = first;
    let bestScore = oldest.affinity?.(item) ?? 0;
    const end = Math.min(this.waiters.length, first + AFFINITY_WINDOW);
    for (let i = first + 1; i < end; i++) {
      const w = this.waiters.peekAt(i)!;
      if (w.done || !w.affinity) continue;
      const score = w.affinity(item);
      if (score > bestScore) {
        best = i;
        bestScore = score;
      }
    }
    return [best, first];
  }

  /** Refuse new requests and fail the waiting ones; items still out are not tracked further. */
  close(): T[] {
    this.closed = true;
    clearTimeout(this.cooling);
    while (!this.waiters.isEmpty()) {
      const waiter = this.waiters.shift()!;
      if (waiter.done) continue;
      this.settle(waiter);
      waiter.reject(engineClosed());
    }
    this.laneKept.clear();
    this.laneLent.clear();
    return this.free.splice(0);
  }
}
