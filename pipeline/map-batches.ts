// The map-batches loop (what Ray Data's map_batches does): read the source
// a batch at a time, keep at most `concurrency` calls in flight, hand each outcome on as it completes.
// Memory stays bounded by batchSize + concurrency items however long the source is.
import { setMaxListeners } from "node:events";

export type Outcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

export interface MapBatchesOptions<T, R> {
  /** Items pulled from the source at a time, once the previous batch is all started. */
  batchSize: number;
  /** Calls of `fn` in flight at once (a slot is held until its `onResult` settles). */
  concurrency: number;
  fn: (item: T, signal: AbortSignal) => Promise<R>;
  /** Called one at a time, in order of completion. A throw stops the loop and rejects mapBatches. */
  onResult: (item: T, outcome: Outcome<R>) => void | Promise<void>;
  /** Stops pulling and starting; calls in flight get it through their `signal`. */
  signal?: AbortSignal;
  /**
   * A gentler stop: nothing new is pulled or started, but the calls in flight run to their end and
   * deliver. `signal` can still cut them short afterwards.
   */
  drain?: AbortSignal;
}

export interface MapBatchesResult<T> {
  /** Stopped by `signal` or `drain` before every item of the source ran. */
  aborted: boolean;
  /** Items pulled but never started because of the stop, in source order. */
  unstarted: T[];
}

/**
 * Runs `fn` over every item of `source`. On abort it waits for the calls in flight to settle
 * (their outcomes are delivered), then returns without closing the source, so the caller can read
 * what is left of it (e.g. to write "cancelled" lines). A source failure stops the pulling, lets the
 * calls in flight finish and deliver, then rethrows. An onResult failure aborts the calls in flight
 * (their outcomes are dropped), closes the source and rethrows.
 */
export async function mapBatches<T, R>(source: AsyncIterable<T>, opts: MapBatchesOptions<T, R>): Promise<MapBatchesResult<T>> {
  const { batchSize, concurrency, fn, onResult } = opts;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);

  // Our own controller so a failure here can stop the calls in flight without touching the caller's signal.
  const inner = new AbortController();
  // Every call in flight may listen on it (a request waiting for an engine sequence does): not a leak.
  setMaxListeners(concurrency + 10, inner.signal);
  const forward = () => inner.abort(opts.signal?.reason);
  if (opts.signal?.aborted) forward();
  opts.signal?.addEventListener("abort", forward, { once: true });

  const iterator = source[Symbol.asyncIterator]();
  const inFlight = callsInFlight();
  let delivery: Promise<void> = Promise.resolve();
  let failure: { error: unknown } | undefined;
  // After onResult failed once, outcomes have nowhere to go; after a source failure they still do.
  let deliveryBroken = false;
  let batch: T[] = [];
  let exhausted = false;

  const fail = (error: unknown) => {
    failure ??= { error };
  };
  const stopped = () => inner.signal.aborted || failure !== undefined || opts.drain?.aborted === true;

  const start = (item: T) => {
    const task = (async () => {
      let outcome: Outcome<R>;
      try {
        outcome = { ok: true, value: await fn(item, inner.signal) };
      } catch (error) {
        outcome = { ok: false, error };
      }
      // Chained so onResult runs one at a time, in completion order.
      const mine = delivery.then(() => (deliveryBroken ? undefined : onResult(item, outcome)));
      delivery = mine.catch(() => undefined);
      await mine;
    })().catch((error) => {
      // Results can no longer be kept, so the calls in flight are wasted work: stop them.
      deliveryBroken = true;
      fail(error);
      inner.abort(error);
    });
    inFlight.add(task);
  };

  try {
    while (!stopped()) {
      if (batch.length === 0) {
        if (exhausted) break;
        batch = await pullBatch(iterator, batchSize, stopped);
        if (batch.length < batchSize && !stopped()) exhausted = true;
        if (batch.length === 0) break;
      }
      while (inFlight.size >= concurrency && !stopped()) await inFlight.oneSettles();
      if (stopped()) break;
      start(batch.shift()!);
    }
  } catch (error) {
    fail(error);
  }
  try {
    await Promise.all(inFlight.calls);
    await delivery;
  } finally {
    // Only now: a stop that comes while the last calls are in flight (after a drain, say) must still reach them.
    opts.signal?.removeEventListener("abort", forward);
  }

  if (failure) {
    await iterator.return?.().catch(() => undefined);
    throw failure.error;
  }
  // A drain that came after the last item started stopped nothing.
  const aborted = inner.signal.aborted || (opts.drain?.aborted === true && !(exhausted && batch.length === 0));
  return { aborted, unstarted: aborted ? batch : [] };
}

/**
 * The calls in flight, and a wait for the next of them to settle. A race over every call in flight would attach
 * `concurrency` reactions for each item started; this is one.
 */
function callsInFlight() {
  const calls = new Set<Promise<void>>();
  let wake: (() => void) | undefined;
  return {
    calls,
    get size() {
      return calls.size;
    },
    add(call: Promise<void>) {
      calls.add(call);
      void call.finally(() => {
        calls.delete(call);
        const w = wake;
        wake = undefined;
        w?.();
      });
    },
    oneSettles: () => new Promise<void>((resolve) => (wake = resolve)),
  };
}

/** Up to `size` items; fewer only at the end of the source or on a stop. */
async function pullBatch<T>(iterator: AsyncIterator<T>, size: number, stopped: () => boolean): Promise<T[]> {
  const out: T[] = [];
  while (out.length < size && !stopped()) {
    const next = await iterator.next();
    if (next.done) break;
    out.push(next.value);
  }
  return out;
}
