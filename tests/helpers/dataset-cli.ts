// A dataset job as `npm run batch -- <argv>` runs it in a folder, in this process, with its output captured.
import pino from "pino";
import type { Config } from "../../config/config.js";
import { parseRunnerArgs } from "../../runner/args.js";
import { runDataset } from "../../runner/run-dataset.js";
import { withArgs } from "../../runner/run-offline.js";

/** The runner's dataset form run in `dir` on `config`: its exit code and what it printed. */
export const datasetCli = (dir: string, config: Config, ...argv: string[]) => datasetRun(dir, config, argv);

/** The same, with `onRunning` told as its requests begin. */
export async function datasetRun(dir: string, config: Config, argv: string[], onRunning?: () => void) {
  const parsed = parseRunnerArgs(argv, dir);
  if (parsed.kind !== "dataset") throw new Error(JSON.stringify(parsed));
  let stdout = "";
  let stderr = "";
  const code = await runDataset(parsed.args, {
    config: withArgs(config, parsed.args.engine),
    logger: pino({ level: "silent" }),
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    ...(onRunning ? { onRunning } : {}),
  });
  return { code, stdout, stderr };
}
