// `npm run batch -- -i input.jsonl -o output.jsonl`: the offline runner's entry point (no server).
// The signal handlers go in before anything heavy loads, so a Ctrl-C during start-up (module loading, the
// model) still ends in a consistent output and the summary instead of the default abrupt exit.
import { onStopSignals } from "../app/signals.js";
import type { AbortReason } from "../pipeline/types.js";

const INTERRUPTED: AbortReason = { code: "shutdown", message: "Interrupted." };

const stop = new AbortController();
onStopSignals((signal, again) => {
  if (again) process.exit(130);
  process.stderr.write(`\n${signal}: stopping once the requests being computed finish; none begins (again to quit now)\n`);
  stop.abort(INTERRUPTED);
});

try {
  const { runCli } = await import("./cli.js");
  process.exitCode = await runCli(stop.signal);
} catch (err) {
  process.stderr.write(`error: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
}
