// When a request begins on the engine, told to whoever asked (ExecuteOptions.onBegin): carried by the request's
// async context as its lane is (lane.ts), so every pool it may wait on (sequences, embedding and ranking contexts)
// tells it as it lends the request an item, without each engine call taking one more argument.
import { AsyncLocalStorage } from "node:async_hooks";

const told = new AsyncLocalStorage<() => void>();

/** Runs `work` so that every pool item lent to it, and to what it starts, is told to `onBegin`. */
export const telling = <T>(onBegin: (() => void) | undefined, work: () => Promise<T>): Promise<T> =>
  onBegin ? told.run(onBegin, work) : work();

/** Who is told when the request this code runs for is lent an item (read when it asks, as the lending may come later). */
export const beginListener = (): (() => void) | undefined => told.getStore();
