// The offline runner's command line, loaded by runner/main.ts once its signal handlers are in place.
import { ConfigError, checkPaths, loadConfig } from "../config/config.js";
import { parseRunnerArgs, USAGE } from "./args.js";
import { createCliLogger } from "./cli-log.js";
import { InputError } from "./run-file.js";
import { describeRefusal, runOffline, USAGE_EXIT, withArgs } from "./run-offline.js";

/** Runs the command line; `stop` is aborted by Ctrl-C (at any moment, loading included); `onRunning` as the requests begin. */
export async function runCli(stop: AbortSignal, onRunning?: () => void): Promise<number> {
  const parsed = parseRunnerArgs(process.argv.slice(2), process.env.INIT_CWD ?? process.cwd());
  if (parsed.kind === "help") {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (parsed.kind === "usage") {
    process.stderr.write(`error: ${parsed.message}\n\n${USAGE}\n`);
    return 2;
  }
  const engine = parsed.kind === "dataset" || parsed.kind === "plan" ? parsed.args.engine : parsed.args;
  // A dataset job's module (DuckDB's with it) is loaded, and its database begun, before the settings are read:
  // DuckDB starts in a thread of its own (35-55 ms) meanwhile.
  const dataset = parsed.kind === "dataset" ? await startDataset(parsed.args.dryRun, stop) : undefined;
  if (typeof dataset === "number") return dataset;
  let config: ReturnType<typeof withArgs>;
  try {
    config = withArgs(loadConfig(), engine);
    checkPaths(config, engine.model ? "--model" : "MODEL_PATH");
  } catch (err) {
    if (dataset?.begun) dataset.module.discardDatabase(dataset.begun);
    if (err instanceof ConfigError) {
      process.stderr.write(`error: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  // Engine notes (threads, GPU) are worth a line on a terminal; LOG_LEVEL=warn hides them.
  const logger = createCliLogger({ level: process.env.LOG_LEVEL ?? "info", json: process.env.LOG_FORMAT === "json" });

  const deps = {
    config,
    logger,
    stderr: process.stderr,
    stdout: process.stdout,
    signal: stop,
    resumeCommand: (began: boolean) => resumeCommand(parsed.kind, process.argv.slice(2), began),
    ...(onRunning ? { onRunning } : {}),
  };
  try {
    if (parsed.kind === "plan") {
      const { formatPlan, planRunFile } = await import("./plan-file.js");
      try {
        process.stdout.write(formatPlan(await planRunFile({ input: parsed.args.input, config, logger, signal: stop })));
        return 0;
      } catch (err) {
        if (!(err instanceof InputError) || stop.aborted) throw err;
        process.stderr.write(describeRefusal(err, undefined, parsed.args.input).replace("nothing was run", "nothing was planned"));
        return USAGE_EXIT;
      }
    }
    if (parsed.kind === "dataset") return await dataset!.module.runDataset(parsed.args, deps, dataset!.begun);
    return (await runOffline(parsed.args, deps)).exitCode;
  } catch (err) {
    return failed(err, stop);
  }
}

/** A run's failure as the terminal tells it, and its exit status. */
function failed(err: unknown, stop: AbortSignal): number {
  if (stop.aborted) return 130;
  process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
  return err instanceof InputError ? USAGE_EXIT : 1;
}

/** The dataset job's module, and its database begun unless the job is a dry run; an exit status where it fails to load. */
async function startDataset(dryRun: boolean, stop: AbortSignal) {
  try {
    const module = await import("./run-dataset.js");
    const begun = dryRun ? undefined : module.beginDatabase();
    // A failure to begin is told where the database is taken.
    begun?.catch(() => undefined);
    return { module, begun };
  } catch (err) {
    return failed(err, stop);
  }
}

/**
 * The command that resumes an interrupted run. A batch file's whose requests began continues the lines its files
 * hold, which --overwrite would throw away; before they began, its files are an earlier run's, and --overwrite still
 * has them to replace. A dataset job's keeps it, since its earlier output is refused without it; its answers are in
 * the result cache (a sampled row's are not: it runs again).
 */
export function resumeCommand(kind: string, argv: string[], began = true): string {
  return commandLine(kind === "dataset" || !began ? argv : argv.filter((a) => a !== "--overwrite"));
}

/** This command as the user could type it again: `npm run batch -- ...` under npm, else node and the script. */
export function commandLine(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  script = process.argv[1] ?? "runner/main.js",
  nodeOptions: readonly string[] = process.execArgv,
): string {
  const quote = (a: string) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`);
  // Node's own options come along (--import tsx runs the TypeScript source): without them the command fails.
  const head =
    env.npm_lifecycle_event === "batch" ? "npm run batch --" : ["node", ...portableOptions(nodeOptions), script].map(quote).join(" ");
  return [head, ...argv.map(quote)].join(" ");
}

/**
 * Node's options with a module they load by package name (`--import tsx`) given as the file it resolves to here, so
 * the command runs from any folder.
 */
export function portableOptions(options: readonly string[], resolve: (name: string) => string = import.meta.resolve): string[] {
  const bare = (s: string) => /^[@\w][\w@./-]*$/.test(s) && !s.startsWith(".") && !s.includes(":");
  const portable = (s: string) => {
    try {
      return bare(s) ? resolve(s) : s;
    } catch {
      return s;
    }
  };
  return options.map((option, i) => {
    const loads = options[i - 1] === "--import" || options[i - 1] === "--require" || options[i - 1] === "-r";
    if (loads) return portable(option);
    const inline = /^(--import|--require)=(.+)$/.exec(option);
    return inline ? `${inline[1]}=${portable(inline[2])}` : option;
  });
}
