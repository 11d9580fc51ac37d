// Which lane a request runs in, carried by its async context: every pool it waits on (sequences, embedding and
// ranking contexts) serves the interactive lane first without each engine call taking one more argument.
import { AsyncLocalStorage } from "node:async_hooks";
import type { Lane } from "../../openai/backend.js";

const lane = new AsyncLocalStorage<{ reserve: boolean }>();

/**
 * Runs `work` in `which` lane; what it awaits, and what that starts, is in the lane too. `reserve` false: the pools
 * keep nothing free for the lane's next request (pool.ts) on this one's account.
 */
export const inLane = <T>(which: Lane | undefined, work: () => Promise<T>, reserve = true): Promise<T> =>
  which === "interactive" ? lane.run({ reserve }, work) : work();

/** Whether the request this code runs for is interactive: a client holds a connection open for it. */
export const interactiveNow = (): boolean => lane.getStore() !== undefined;

/** Whether the request this code runs for is interactive and keeps the lane's reserve warm. */
export const reserveWanted = (): boolean => lane.getStore()?.reserve === true;
