// `npm run batch -- -i input.jsonl -o output.jsonl`: the offline runner's entry point (no server).
// The signal handlers go in before anything heavy loads, so a Ctrl-C during start-up (module loading, the
// model) still ends in a consistent output and the summary instead of the default abrupt exit.
import { onStopSignals } from "../app/signals.js";
import type { AbortReason } from "../pipeline/types.js";

const INTERRUPTED: AbortReason = { code: "shutdown", message: "Interrupted." };

const stop = new AbortController();
/** Whether the requests run (the model is up): before, a stop has nothing to wait for. */
let running = false;
onStopSignals((signal, again) => {
  if (again) process.exit(130);
  if (running) process.stderr.write(`\n${signal}: stopping once the requests being computed finish; none begins (again to quit now)\n`);
  else process.stderr.write(`\n${signal}: stopping\n`);
  stop.abort(INTERRUPTED);
});

try {
  const { runCli } = await import("./cli.js");
  process.exitCode = await runCli(stop.signal, () => {
    running = true;
  });
} catch (err) {
  process.stderr.write(`error: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
}
// An interrupted run has written its files and summary; what the stop left behind (node-llama-cpp's test of a binary, a
// download's connection) is not waited for, only the summary's way out (a pipe is written asynchronously).
if (stop.signal.aborted) {
  const flushed = (stream: NodeJS.WriteStream) => new Promise<void>((resolve) => stream.write("", () => resolve()));
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  process.exit();
}
