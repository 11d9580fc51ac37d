// One offline run: fetch the input if it is a URL, validate it as POST /v1/batches would, bring up
// the engine as the server does, run every line through the same pipeline, deliver the results.
import { mkdir, mkdtemp, rename, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type pino from "pino";
import { createRouter, loadRegistry } from "../backends/build.js";
import { costOf, type Price, roundMoney } from "../backends/price.js";
import type { ModelRegistry } from "../backends/registry.js";
import type { Config } from "../config/config.js";
import { isEndpoint, READS_ONLY, type TokenUsage } from "../openai/backend.js";
import { readJsonlLines } from "../pipeline/jsonl.js";
import { type DoneScan, repairTornTail, scanDone } from "../pipeline/resume.js";
import { runBatchFile } from "../pipeline/run-batch.js";
import type { AbortReason, Endpoint, RunBatchResult, ValidationResult } from "../pipeline/types.js";
import { validateBatchFile } from "../pipeline/validate.js";
import type { EngineArgs, RunnerArgs } from "./args.js";
import { createProgressReporter, formatDuration, type ProgressStream, type RunRates, type TokenKind, tokenUnit } from "./progress.js";
import { displayLocation, download, type HttpRetry, isUrl, upload } from "./remote.js";

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
  resumeCommand?: string;
  /** False where the caller reports its own files (a dataset job's table): the summary leaves out the result files. */
  resultFiles?: boolean;
  /** How problems name the input, where the caller made it from another file (a dataset job's table). */
  inputLabel?: string;
  /** Told when the requests begin running (the model is up): a stop from then on is the run's drain. */
  onRunning?: () => void;
}

export interface OfflineRunResult {
  /** 0 ran (even if some requests failed), 1 invalid input, 130 interrupted. */
  exitCode: number;
  endpoint?: Endpoint;
  validation?: ValidationResult;
  result?: RunBatchResult;
}

/** Why a run stopped at a Ctrl-C: nothing more is written, and running again resumes. */
const INTERRUPTED: AbortReason = { code: "shutdown", message: "Interrupted." };

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
  };
}

export async function runOffline(args: RunnerArgs, deps: OfflineRunDeps): Promise<OfflineRunResult> {
  const work = await mkdtemp(path.join(os.tmpdir(), "obi-run-"));
  const started = Date.now();
  const run: RunState = { args, deps, work, started };
  try {
    return await runPhases(run);
  } catch (err) {
    // A Ctrl-C before the requests run (a download, the model's load) ends the same way as one during the run.
    if (deps.signal?.aborted && !run.ran) return await interrupted(run);
    throw err;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** What a run has learnt so far, for the summary an interruption prints whenever it comes. */
interface RunState {
  args: RunnerArgs;
  deps: OfflineRunDeps;
  work: string;
  started: number;
  endpoint?: Endpoint;
  validation?: ValidationResult;
  reused?: DoneScan;
  /** The requests began running: what stops them now is the run's drain, which ends in its own summary. */
  ran?: boolean;
}

async function runPhases(run: RunState): Promise<OfflineRunResult> {
  const { args, deps } = run;
  const { config, stderr, stdout, signal } = deps;
  const input = isUrl(args.input) ? path.join(run.work, "input.jsonl") : path.resolve(args.input);
  if (isUrl(args.input)) {
    const bytes = await download(args.input, input, { retry: deps.httpRetry, signal });
    stderr.write(`downloaded ${displayLocation(args.input)} (${bytes} bytes)\n`);
  } else {
    await assertFile(input);
  }

  const endpoint = await detectEndpoint(input, config.maxLineBytes);
  run.endpoint = endpoint;
  const validation = await validateBatchFile(input, endpoint, {
    maxRequests: config.maxRequestsPerBatch,
    maxLineBytes: config.maxLineBytes,
  });
  run.validation = validation;
  if (!validation.ok) {
    stderr.write(describeInvalid(deps.inputLabel ?? args.input, validation));
    return { exitCode: USAGE_EXIT, endpoint, validation };
  }
  if (signal?.aborted) return await interrupted(run);

  const output = isUrl(args.output) ? path.join(run.work, "output.jsonl") : path.resolve(args.output);
  const errors = isUrl(args.errors) ? path.join(run.work, "errors.jsonl") : path.resolve(args.errors);
  const files = { input, output, errors };
  const reused = await earlierResults(args, files, deps);
  if (typeof reused === "number") return { exitCode: reused, endpoint, validation };
  if (reused) run.reused = reused;

  const registry = await loadRegistry(config, deps.logger, {
    hint: "--model hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0 (or MODEL_PATH=...)",
    setting: config.modelPath === args.model ? "--model" : "MODEL_PATH",
    signal: deps.signal,
  });
  const spec = registry.resolve(validation.model);
  if (!spec) {
    const named =
      validation.model === undefined ? "the requests name no model" : `the model '${validation.model}' is not in the models file`;
    stderr.write(`${deps.inputLabel ?? displayLocation(args.input)}: ${named}; it serves ${registry.names.join(", ")}\n`);
    return { exitCode: USAGE_EXIT, endpoint, validation };
  }
  if (reused && reused.done.size >= validation.total) {
    // Every request already has its result: nothing to run, so no model is loaded (the lines' model was checked above).
    stdout.write(
      `nothing to run: all ${validation.total} requests of ${displayLocation(args.input)} already have a result ` +
        `(${reused.completed} completed, ${reused.failed} failed); --overwrite runs them again, --retry-failed reruns the failed\n`,
    );
    return { exitCode: 0, endpoint, validation };
  }
  if (signal?.aborted) return await interrupted(run);

  const ran = await runOnModel(run, files, registry, spec.name);
  if (typeof ran === "number") return { exitCode: ran, endpoint, validation };
  const { result, rates } = ran;
  const seconds = (Date.now() - run.started) / 1000;
  // Each file appears with its first line: a run where no request completed has no output file.
  const hasOutput = await exists(output);
  const hasErrors = await exists(errors);
  // What finished is delivered even after a Ctrl-C (a second one quits at once).
  if (hasOutput && isUrl(args.output)) await upload(output, args.output, { retry: deps.httpRetry });
  if (hasErrors && isUrl(args.errors)) await upload(errors, args.errors, { retry: deps.httpRetry });
  stdout.write(
    summary({
      args,
      endpoint,
      result,
      seconds,
      hasOutput,
      hasErrors,
      reused: reused?.done.size ?? 0,
      reusedUsage: reused?.usage,
      price: spec.price,
      rates,
      resume: deps.resumeCommand,
      resultFiles: deps.resultFiles ?? true,
    }),
  );
  return { exitCode: result.aborted ? 130 : 0, endpoint, validation, result };
}

/**
 * What an earlier run of this input left (null: nothing, a fresh run); or an exit code where the run stops here
 * (nothing to retry, another file's results in the output). Nothing is changed yet (prepareFiles does, as the run
 * begins), so a run that never begins (a model that fails to load, a Ctrl-C) leaves the files as they were.
 */
async function earlierResults(
  args: RunnerArgs,
  files: { input: string; output: string; errors: string },
  deps: OfflineRunDeps,
): Promise<DoneScan | null | number> {
  const { stderr, config } = deps;
  const { input, output, errors } = files;
  if (args.retryFailed && !(await exists(errors))) {
    stderr.write(`nothing to retry: ${displayLocation(args.errors)} does not exist (no request failed)\n`);
    return 0;
  }
  // The failed lines are run again, so only the output's count as done.
  const reused = args.overwrite ? null : await resumable(input, output, args.retryFailed ? null : errors, config.maxLineBytes);
  if (reused && "foreign" in reused) {
    stderr.write(
      `${displayLocation(args.output)} holds results for requests that are not in ${displayLocation(args.input)} ` +
        `(such as '${reused.foreign}'): pass --overwrite to replace them\n`,
    );
    return USAGE_EXIT;
  }
  if (reused && reused.done.size > 0) {
    stderr.write(
      `continuing: ${reused.done.size} requests already in the output${args.retryFailed ? "" : " and error"} files are skipped (--overwrite starts afresh)\n`,
    );
  }
  return reused;
}

/**
 * The result files made ready as the requests begin: --retry-failed moves the error file aside (its lines run again),
 * a fresh run removes earlier results; the output and the error file then appear with their first line.
 */
async function prepareFiles(run: RunState, files: { output: string; errors: string }): Promise<void> {
  const { args, deps } = run;
  await mkdir(path.dirname(files.output), { recursive: true });
  if (args.retryFailed) {
    await rename(files.errors, `${files.errors}.retried`);
    deps.stderr.write(`retrying the failed requests of ${displayLocation(args.errors)} (kept as ${path.basename(files.errors)}.retried)\n`);
  } else if (!run.reused) {
    await rm(files.output, { force: true });
    await rm(files.errors, { force: true });
  }
}

/**
 * Brings the model up and runs the lines on it. A Ctrl-C while the model loads stops the load; one while the lines
 * run is the run's drain: no request begins any more, and those computing finish and are written.
 */
async function runOnModel(
  run: RunState,
  files: { input: string; output: string; errors: string },
  registry: ModelRegistry,
  model: string,
): Promise<{ result: RunBatchResult; rates: RunRates } | number> {
  const { deps, validation, reused } = run;
  const { config, stderr, signal } = deps;
  const endpoint = run.endpoint!;
  const total = validation!.total;
  const router = await createRouter(config, registry, deps.logger);
  try {
    const lease = await router.acquire(model, signal);
    const backend = lease.backend;
    if (!backend.info.endpoints.includes(endpoint)) {
      stderr.write(`${endpoint} is not served by this backend (it serves ${backend.info.endpoints.join(", ")})\n`);
      return USAGE_EXIT;
    }
    run.ran = true;
    deps.onRunning?.();
    await prepareFiles(run, files);
    stderr.write(`running ${total} requests (${endpoint}) on ${backend.info.model}: ${backend.info.summary}\n`);
    const progress = createProgressReporter({
      total,
      stream: stderr,
      intervalMs: deps.progressIntervalMs,
      tokens: tokenKind(endpoint),
      ...(reused
        ? { base: { done: reused.done.size, completionTokens: reused.usage.completionTokens, promptTokens: reused.usage.promptTokens } }
        : {}),
    });
    const result = await runBatchFile({
      inputPath: files.input,
      outputPath: files.output,
      errorPath: files.errors,
      endpoint,
      backend,
      batchSize: config.pipeline.batchSize,
      concurrency: config.pipeline.concurrency,
      order: config.pipeline.order,
      // Nothing cuts a request short: a second Ctrl-C ends the process, and a resume cuts a torn last line.
      ...(signal ? { drain: signal } : {}),
      ...(reused ? { done: reused.done, base: reused } : {}),
      onProgress: (p) => progress.update(p),
    });
    const rates = progress.finish(result);
    lease.release();
    return { result, rates };
  } finally {
    await router.close();
  }
}

/** The summary of a run stopped before its requests ran: what the files hold from before, and how to resume. */
async function interrupted(run: RunState): Promise<OfflineRunResult> {
  const { args, deps, reused } = run;
  const result: RunBatchResult = {
    completed: reused?.completed ?? 0,
    failed: reused?.failed ?? 0,
    usage: reused?.usage ?? { promptTokens: 0, cachedTokens: 0, completionTokens: 0 },
    aborted: INTERRUPTED,
  };
  const seconds = (Date.now() - run.started) / 1000;
  deps.stdout.write(
    summary({
      args,
      endpoint: run.endpoint,
      result,
      seconds,
      // Nothing was written: the files are what an earlier run left (a URL is written only at a run's end).
      hasOutput: !isUrl(args.output) && (await exists(args.output)),
      hasErrors: !isUrl(args.errors) && (await exists(args.errors)),
      reused: reused?.done.size ?? 0,
      reusedUsage: reused?.usage,
      rates: { seconds: 0, requestsPerSecond: 0, tokensPerSecond: 0 },
      resume: deps.resumeCommand,
      resultFiles: deps.resultFiles ?? true,
    }),
  );
  return { exitCode: 130, endpoint: run.endpoint, validation: run.validation, result };
}

/** The endpoint named by the first line; validation then holds every other line to it. */
/** The exit status of input the runner cannot take (a flag, a file, a job, a dataset, a model it does not serve). */
export const USAGE_EXIT = 2;

/** Input the runner cannot take, found as it runs: exit USAGE_EXIT, as a bad flag is. */
export class InputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InputError";
  }
}

async function detectEndpoint(file: string, maxLineBytes: number): Promise<Endpoint> {
  for await (const line of readJsonlLines(file, { maxLineBytes })) {
    if (line.tooLong || line.text.trim() === "") continue;
    try {
      const url = (JSON.parse(line.text) as { url?: unknown })?.url;
      if (isEndpoint(url)) return url;
    } catch {
      // Validation reports the line.
    }
    break;
  }
  return "/v1/chat/completions";
}

async function assertFile(file: string): Promise<void> {
  const s = await stat(file).catch(() => null);
  if (!s?.isFile()) throw new InputError(`no such input file: ${file}`);
}

async function exists(file: string): Promise<boolean> {
  return (await stat(file).catch(() => null)) !== null;
}

function describeInvalid(input: string, v: ValidationResult): string {
  const lines = v.errors.slice(0, SHOWN_ERRORS).map((e) => `  ${e.line === null ? "file" : `line ${e.line}`}: ${e.code}: ${e.message}`);
  const more = v.errorCount - lines.length;
  if (more > 0) lines.push(`  ... and ${more} more`);
  const problems = v.errorCount === 1 ? "1 problem" : `${v.errorCount} problems`;
  return `error: ${displayLocation(input)} is not a valid batch file (${problems}); nothing was run:\n${lines.join("\n")}\n`;
}

function summary(s: {
  args: RunnerArgs;
  /** Unknown where the run stopped before reading its input. */
  endpoint?: Endpoint;
  result: RunBatchResult;
  seconds: number;
  hasOutput: boolean;
  hasErrors: boolean;
  reused: number;
  /** The earlier run's tokens: the rate and the cost count only this run's. */
  reusedUsage?: TokenUsage;
  /** The model's price in the models file. */
  price?: Price;
  /** The progress bar's final rates, which the summary repeats so that the two agree. */
  rates: RunRates;
  /** The command that runs this one again, which resumes after what it wrote. */
  resume?: string;
  resultFiles: boolean;
}): string {
  const { result: r, seconds } = s;
  const done = r.completed + r.failed;
  const reused = s.reused > 0 ? ` (${s.reused} from the earlier run)` : "";
  const was = s.reusedUsage ?? { promptTokens: 0, cachedTokens: 0, completionTokens: 0 };
  const head = r.aborted ? `interrupted after ${done} requests` : `${done} requests`;
  const thisRun = `this run: ${done - s.reused} requests in ${formatDuration(s.rates.seconds)}, ${s.rates.requestsPerSecond.toFixed(1)} req/s`;
  return [
    `${head}${reused}${s.endpoint ? ` (${s.endpoint})` : ""} in ${formatDuration(seconds)}: ${r.completed} completed, ${r.failed} failed`,
    `tokens: ${r.usage.promptTokens} prompt, ${r.usage.completionTokens} completion (${thisRun}, ${Math.round(s.rates.tokensPerSecond)} ${s.endpoint ? tokenUnit(tokenKind(s.endpoint)) : "tok/s"})`,
    ...(s.price ? [costLine(s.price, s.args.pool ?? "dedicated", seconds, r.usage, was)] : []),
    ...(s.resultFiles
      ? [
          `output: ${s.hasOutput ? displayLocation(s.args.output) : "none"}`,
          `errors: ${s.hasErrors ? displayLocation(s.args.errors) : "none"}`,
        ]
      : []),
    ...(r.aborted && s.resume ? [`resume with: ${s.resume}`] : []),
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

/**
 * What an earlier run of this input left in a local output: its results (a torn last line cut first), or the
 * first custom_id there that the input does not hold (another file's results: not mixed in). Null when
 * there is nothing to continue (no output yet, or a URL output, which is written whole at the end).
 */
async function resumable(
  input: string,
  output: string,
  errors: string | null,
  maxLineBytes: number,
): Promise<DoneScan | { foreign: string } | null> {
  if (!(await exists(output)) && !(errors && (await exists(errors)))) return null;
  await repairTornTail(output);
  if (errors) await repairTornTail(errors);
  const scan = await scanDone(output, errors);
  if (scan.done.size === 0) return scan;
  const ids = new Set<string>();
  for await (const line of readJsonlLines(input, { maxLineBytes })) {
    try {
      const id = (JSON.parse(line.text) as { custom_id?: unknown })?.custom_id;
      if (typeof id === "string") ids.add(id);
    } catch {
      // Validation already passed; nothing to learn from a line that is not JSON.
    }
  }
  for (const id of scan.done) if (!ids.has(id)) return { foreign: id };
  return scan;
}

/** The tokens a run's rate counts: the prompt's where its requests generate none (embeddings, rerank, score). */
const tokenKind = (endpoint: Endpoint): TokenKind => (READS_ONLY.includes(endpoint) ? "prompt" : "completion");
