// A run's drain, carried by the async context of each request the run sends: a request still waiting for a
// sequence or a context when its run drains (a Ctrl-C, a cancel's grace, a shutdown) gives its wait up, while one
// already computing runs to its end, without each engine call taking one more argument (as lane.ts carries the lane).
import { AsyncLocalStorage } from "node:async_hooks";

const drains = new AsyncLocalStorage<AbortSignal>();

/** Runs `work` for a run that drains on `drain`; what it awaits, and what that starts, sees the drain too. */
export const underDrain = <T>(drain: AbortSignal | undefined, work: () => Promise<T>): Promise<T> =>
  drain ? drains.run(drain, work) : work();

/** The drain of the run this request belongs to, if it has one. */
export const currentDrain = (): AbortSignal | undefined => drains.getStore();
