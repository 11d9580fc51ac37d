// One offline run as the command line shows it: runFile (run-file.ts) with its progress drawn on stderr, its summary
// printed on stdout and its outcome turned into an exit status.
import type pino from "pino";
import { costOf, type Price, roundMoney } from "../backends/price.js";
import type { Config } from "../config/config.js";
import { READS_ONLY, type TokenUsage } from "../openai/backend.js";
import type { Endpoint, ValidationResult } from "../pipeline/types.js";
import type { EngineArgs, RunnerArgs } from "./args.js";
import {
  createProgressReporter,
  formatDuration,
  type ProgressReporter,
  type ProgressStream,
  type RunRates,
  type TokenKind,
  tokenUnit,
} from "./progress.js";
import { displayLocation, type HttpRetry } from "./remote.js";
import {
  InputError,
  InvalidFileError,
  ModelNotServedError,
  type RunEvent,
  type RunFileOptions,
  type RunSummary,
  runFile,
} from "./run-file.js";

/** What the command line runs with: its settings and where it prints. */
export interface OfflineRunDeps {
  /** Engine and pipeline settings (from the environment and config/model_config.yaml). */
  config: Config;
  logger: pino.Logger;
  /** Progress and problems. */
  stderr: ProgressStream;
  /** The summary. */
  stdout: { write(text: string): unknown };
  /** Aborting stops the run; what finished stays in the output. */
  signal?: AbortSignal;
  httpRetry?: HttpRetry;
  progressIntervalMs?: number;
  /** The command line that runs this again (printed after an interrupt: a second run resumes). */
  resumeCommand?: string | ((began: boolean) => string);
  /** Told when the requests begin running (the model is up): a stop from then on is the run's drain. */
  onRunning?: () => void;
}

/** How a run is shown, beyond what OfflineRunDeps says. */
export interface RunView {
  /** How problems name the input (default: the input's location). */
  label?: string;
  /** False where the caller reports its own files (a dataset job's table): the summary leaves out the result files. */
  resultFiles?: boolean;
  /** Whose hourly price the summary's cost uses. */
  pool?: "spot" | "dedicated";
}

export interface OfflineRunResult {
  /** 0 ran (even if some requests failed), 2 input it cannot take, 130 interrupted. */
  exitCode: number;
  /** Absent where the input was refused. */
  summary?: RunSummary;
}

/** The exit status of input the runner cannot take (a flag, a file, a job, a dataset, a model it does not serve). */
export const USAGE_EXIT = 2;

/** Problems listed on the terminal; the rest are counted. */
const SHOWN_ERRORS = 20;

/** The flags win over the environment and the model config file. */
export function withArgs(config: Config, args: EngineArgs): Config {
  return {
    ...config,
    // A flag replaces the environment's choice of model whichever form that took.
    modelPath: args.model ?? (args.modelsFile ? "" : config.modelPath),
    modelsFile: args.modelsFile ?? (args.model ? "" : config.modelsFile),
    engine: {
      ...config.engine,
      threads: args.threads ?? config.engine.threads,
      sequences: args.sequences ?? config.engine.sequences,
      contexts: args.contexts ?? config.engine.contexts,
      contextSize: args.contextSize ?? config.engine.contextSize,
    },
    pipeline: { ...config.pipeline, concurrency: args.concurrency ?? config.pipeline.concurrency },
    resultCache: { ...config.resultCache, enabled: config.resultCache.enabled && !args.noCache },
  };
}

/** The command line's run of a batch file: its flags as runFile's options, shown as `npm run batch` shows it. */
export async function runOffline(args: RunnerArgs, deps: OfflineRunDeps): Promise<OfflineRunResult> {
  const options: RunFileOptions = {
    input: args.input,
    output: args.output,
    errors: args.errors,
    config: deps.config,
    logger: deps.logger,
    overwrite: !!args.overwrite,
    retryFailed: !!args.retryFailed,
    modelHint: modelHint(deps.config, args),
  };
  return await printedRun(options, deps, args.pool ? { pool: args.pool } : {});
}

/** How a model that cannot be found is told to be given: by --model where the flag named it. */
export function modelHint(config: Config, args: EngineArgs): { hint: string; setting: string } {
  return {
    hint: "--model hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0 (or MODEL_PATH=...)",
    setting: config.modelPath === args.model ? "--model" : "MODEL_PATH",
  };
}

/**
 * runFile with its progress on stderr and its summary on stdout. Input it cannot take is told on stderr (exit
 * USAGE_EXIT), except a missing input file, which is thrown as the command line's other errors are.
 */
export async function printedRun(options: RunFileOptions, deps: OfflineRunDeps, view: RunView = {}): Promise<OfflineRunResult> {
  const shown = showEvents(deps, options);
  let summary: RunSummary;
  try {
    summary = await runFile({
      ...options,
      ...(deps.signal ? { signal: deps.signal } : {}),
      ...(deps.httpRetry ? { httpRetry: deps.httpRetry } : {}),
      onEvent: shown.onEvent,
    });
  } catch (err) {
    if (!(err instanceof InputError) || err.reason === "no_input") throw err;
    deps.stderr.write(describeRefusal(err, view.label, options.input));
    return { exitCode: USAGE_EXIT };
  }
  if (summary.stopped === "nothing_to_retry") {
    deps.stderr.write(`nothing to retry: ${displayLocation(options.errors)} does not exist (no request failed)\n`);
  } else if (summary.stopped === "nothing_to_run") {
    deps.stdout.write(
      `nothing to run: all ${summary.total} requests of ${displayLocation(options.input)} already have a result ` +
        `(${summary.completed} completed, ${summary.failed} failed); --overwrite runs them again, --retry-failed reruns the failed\n`,
    );
  } else {
    deps.stdout.write(
      describeSummary(summary, {
        ...view,
        rates: shown.rates(),
        resume: typeof deps.resumeCommand === "function" ? deps.resumeCommand(summary.began) : deps.resumeCommand,
      }),
    );
  }
  return { exitCode: summary.stopped === "interrupted" ? 130 : 0, summary };
}

/** A run's events as the command line shows them: a line for each step, the progress bar while the requests run. */
function showEvents(deps: OfflineRunDeps, options: RunFileOptions) {
  const { stderr } = deps;
  let progress: ProgressReporter | undefined;
  let rates: RunRates = { seconds: 0, requestsPerSecond: 0, tokensPerSecond: 0 };
  const onEvent = (e: RunEvent) => {
    options.onEvent?.(e);
    if (e.type === "downloaded") stderr.write(`downloaded ${displayLocation(e.from)} (${e.bytes} bytes)\n`);
    else if (e.type === "continuing")
      stderr.write(
        `continuing: ${e.requests} requests already in the output${e.retryFailed ? "" : " and error"} files are skipped (--overwrite starts afresh)\n`,
      );
    else if (e.type === "retrying") stderr.write(`retrying the failed requests of ${displayLocation(e.errors)} (kept as ${e.keptAs})\n`);
    else if (e.type === "running") {
      deps.onRunning?.();
      stderr.write(`running ${e.total} requests (${e.endpoint}) on ${e.model}: ${e.backend}\n`);
      const base = e.earlier && {
        done: e.earlier.requests,
        completionTokens: e.earlier.usage.completionTokens,
        promptTokens: e.earlier.usage.promptTokens,
      };
      progress = createProgressReporter({
        total: e.total,
        stream: stderr,
        intervalMs: deps.progressIntervalMs,
        tokens: tokenKind(e.endpoint),
        ...(base ? { base } : {}),
      });
    } else if (e.type === "progress") progress?.update(e.progress);
    else if (e.type === "ran" && progress) rates = progress.finish(e.progress);
  };
  return { onEvent, rates: () => rates };
}

/** Input refused before anything ran, as the terminal shows it. */
export function describeRefusal(err: InputError, label: string | undefined, input: string): string {
  if (err instanceof InvalidFileError) return describeInvalid(label ?? input, err.validation);
  if (err instanceof ModelNotServedError) return `${label ?? displayLocation(input)}: ${err.message}\n`;
  return `${err.message}\n`;
}

function describeInvalid(input: string, v: ValidationResult): string {
  const lines = v.errors.slice(0, SHOWN_ERRORS).map((e) => `  ${e.line === null ? "file" : `line ${e.line}`}: ${e.code}: ${e.message}`);
  const more = v.errorCount - lines.length;
  if (more > 0) lines.push(`  ... and ${more} more`);
  const problems = v.errorCount === 1 ? "1 problem" : `${v.errorCount} problems`;
  return `error: ${displayLocation(input)} is not a valid batch file (${problems}); nothing was run:\n${lines.join("\n")}\n`;
}

/** The summary on stdout: counts, tokens and this run's rates (the progress bar's, so that the two agree), cost, files. */
export function describeSummary(s: RunSummary, view: RunView & { rates: RunRates; resume?: string | undefined }): string {
  const done = s.completed + s.failed;
  const earlier = s.earlier?.requests ?? 0;
  const was = s.earlier?.usage ?? { promptTokens: 0, cachedTokens: 0, completionTokens: 0 };
  const aborted = s.stopped === "interrupted";
  const head = aborted ? `interrupted after ${done} requests` : `${done} requests`;
  const reused = earlier > 0 ? ` (${earlier} from the earlier run)` : "";
  const cached = s.cached > 0 ? `, ${s.cached} of this run's answered from the cache` : "";
  const { rates } = view;
  const thisRun = `this run: ${done - earlier} requests in ${formatDuration(rates.seconds)}, ${rates.requestsPerSecond.toFixed(1)} req/s`;
  const unit = s.endpoint ? tokenUnit(tokenKind(s.endpoint)) : "tok/s";
  return [
    `${head}${reused}${s.endpoint ? ` (${s.endpoint})` : ""} in ${formatDuration(s.seconds)}: ${s.completed} completed, ${s.failed} failed${cached}`,
    `tokens: ${s.usage.promptTokens} prompt, ${s.usage.completionTokens} completion (${thisRun}, ${Math.round(rates.tokensPerSecond)} ${unit})`,
    ...(s.price ? [costLine(s.price, view.pool ?? "dedicated", s.seconds, s.usage, was)] : []),
    ...(view.resultFiles === false
      ? []
      : [`output: ${s.output ? displayLocation(s.output) : "none"}`, `errors: ${s.errors ? displayLocation(s.errors) : "none"}`]),
    ...(aborted && view.resume ? [`resume with: ${view.resume}`] : []),
    "",
  ].join("\n");
}

/** "cost: 0.000123 USD (41.0 s of a dedicated slot at 2.5 USD/hour)", for this run's time or tokens. */
function costLine(price: Price, pool: "spot" | "dedicated", seconds: number, usage: TokenUsage, was: TokenUsage): string {
  const work = {
    seconds,
    inputTokens: usage.promptTokens - was.promptTokens,
    cachedTokens: usage.cachedTokens - was.cachedTokens,
    outputTokens: usage.completionTokens - was.completionTokens,
  };
  const amount = roundMoney(costOf(price, pool, work));
  const basis =
    price.basis === "pool_hours"
      ? `${seconds.toFixed(1)} s of a ${pool} slot at ${pool === "spot" ? price.spotPerHour : price.dedicatedPerHour} ${price.currency}/hour`
      : `${work.inputTokens} input (${work.cachedTokens} cached) and ${work.outputTokens} output tokens at ${price.inputPerMillion} (cached ${price.cachedInputPerMillion}) in, ${price.outputPerMillion} out ${price.currency} per million`;
  return `cost: ${amount} ${price.currency} (${basis})`;
}

/** The tokens a run's rate counts: the prompt's where its requests generate none (embeddings, rerank, score). */
const tokenKind = (endpoint: Endpoint): TokenKind => (READS_ONLY.includes(endpoint) ? "prompt" : "completion");
