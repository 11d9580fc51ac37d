// A run's drain over one try on the backend: a try still waiting for its turn (a sequence, a context, an
// upstream's room) when the run drains is called off, unrun, and one the backend has told began
// (ExecuteOptions.onBegin) runs to its end, so a drain of any kind (a pause, a cancel, a preemption, a yield, a
// shutdown, the runner's Ctrl-C) begins nothing more on either kind of backend.
import { RequestError } from "../openai/errors.js";

/** A try that a drain called off before it began on the backend: it ran nothing. Its cause is the drain's reason. */
export class NotBegun extends Error {
  constructor(reason: unknown) {
    super("The run was drained before this request began.", { cause: reason });
    this.name = "NotBegun";
  }
}

/**
 * Runs one try, `work`, with a signal that `drain` aborts (with its reason) while the backend has not told the try
 * it began (the `onBegin` given to `work`), and never after. A try called off rejects with NotBegun, whatever the
 * backend threw for it, unless that was the request's own refusal. `signal` still cuts it short, begun or not;
 * `began` is told as the backend tells it.
 */
export async function callOffUnbegun<T>(
  drain: AbortSignal,
  signal: AbortSignal,
  work: (signal: AbortSignal, onBegin: () => void) => Promise<T>,
  began?: () => void,
): Promise<T> {
  if (drain.aborted) throw new NotBegun(drain.reason);
  const waiting = new AbortController();
  let begun = false;
  const callOff = () => {
    if (!begun) waiting.abort(drain.reason);
  };
  drain.addEventListener("abort", callOff, { once: true });
  try {
    return await work(AbortSignal.any([signal, waiting.signal]), () => {
      begun = true;
      began?.();
    });
  } catch (err) {
    // A refusal of the request itself (a prompt too long, say) is its own line, drained or not.
    const refused = err instanceof RequestError && !err.retryable;
    if (waiting.signal.aborted && !signal.aborted && !refused) throw new NotBegun(drain.reason);
    throw err;
  } finally {
    drain.removeEventListener("abort", callOff);
  }
}
