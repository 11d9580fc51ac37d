// `npm run batch -- -i input.jsonl -o output.jsonl`: the offline runner's entry point (no server).
import { ConfigError, checkPaths, loadConfig } from "../api/config.js";
import type { AbortReason } from "../pipeline/types.js";
import { parseRunnerArgs, USAGE } from "./args.js";
import { createCliLogger } from "./cli-log.js";
import { runOffline, withArgs } from "./run-offline.js";
import { onStopSignals } from "../api/signals.js";

const INTERRUPTED: AbortReason = { code: "shutdown", message: "Interrupted." };

async function main(): Promise<number> {
  const parsed = parseRunnerArgs(process.argv.slice(2), process.env.INIT_CWD ?? process.cwd());
  if (parsed.kind === "help") {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (parsed.kind === "usage") {
    process.stderr.write(`error: ${parsed.message}\n\n${USAGE}\n`);
    return 2;
  }
  const { args } = parsed;
  let config: ReturnType<typeof withArgs>;
  try {
    config = withArgs(loadConfig(), args);
    checkPaths(config);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`error: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  // Engine notes (threads, GPU) are worth a line on a terminal; LOG_LEVEL=warn hides them.
  const logger = createCliLogger({ level: process.env.LOG_LEVEL ?? "info", json: process.env.LOG_FORMAT === "json" });

  const stop = new AbortController();
  onStopSignals((signal, again) => {
    if (again) process.exit(130);
    process.stderr.write(`\n${signal}: stopping after the requests in flight (again to quit now)\n`);
    stop.abort(INTERRUPTED);
  });

  try {
    const { exitCode } = await runOffline(args, { config, logger, stderr: process.stderr, stdout: process.stdout, signal: stop.signal });
    return exitCode;
  } catch (err) {
    if (stop.signal.aborted) return 130;
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`error: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
