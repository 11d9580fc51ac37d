// SIGTERM/SIGINT for the server and the runner: the first asks for a graceful stop, a later one for an
// immediate exit. A signal sent to a whole process group (Ctrl-C in a terminal, `docker stop` of a shell
// wrapper) reaches npm, a shell and node at once, and npm forwards its copy: the same stop arrives twice
// within milliseconds, or later on a loaded machine, where npm's forwarded copy waits for its event loop. Repeats
// within a second are that one stop, not the user asking again (who does so after reading "shutting down").
export const SIGNAL_REPEAT_MS = 1_000;

/** Returns a function that removes the listeners. */
export function onStopSignals(handler: (signal: NodeJS.Signals, again: boolean) => void, now = () => Date.now()): () => void {
  let first: number | null = null;
  const on = (signal: NodeJS.Signals) => {
    const t = now();
    if (first === null) {
      first = t;
      handler(signal, false);
    } else if (t - first >= SIGNAL_REPEAT_MS) handler(signal, true);
  };
  const term = () => on("SIGTERM");
  const int = () => on("SIGINT");
  process.on("SIGTERM", term);
  process.on("SIGINT", int);
  return () => {
    process.off("SIGTERM", term);
    process.off("SIGINT", int);
  };
}
