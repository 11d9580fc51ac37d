// The offline run as a library: a batch file (a path or an http(s) URL) validated as POST /v1/batches would, run on
// the engine the server would bring up, its results delivered to the output and error files, and a summary returned;
// it prints nothing (progress is a callback) and never exits the process.
import { mkdir, mkdtemp, rename, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { type BackendCache, createRouter, loadRegistry } from "../backends/build.js";
import type { Price } from "../backends/price.js";
import type { ModelRegistry } from "../backends/registry.js";
import { withCacheOptions } from "../cache/caching-backend.js";
import { openEmbeddedCache } from "../cache/open.js";
import type { Config } from "../config/config.js";
import { isEndpoint, type TokenUsage } from "../openai/backend.js";
import { readJsonlLines } from "../pipeline/jsonl.js";
import { type DoneScan, repairTornTail, scanDone } from "../pipeline/resume.js";
import { runBatchFile } from "../pipeline/run-batch.js";
import type { AbortReason, Endpoint, Progress, RunBatchResult, ValidationResult } from "../pipeline/types.js";
import { validateBatchFile } from "../pipeline/validate.js";
import { recordRate, runWork } from "./rates.js";
import { displayLocation, download, type HttpRetry, isUrl, upload } from "./remote.js";

export interface RunFileOptions {
  /** The batch file: a local path or an http(s) URL (downloaded first). */
  input: string;
  /** Where the results go: a local path (filled as the requests finish) or an http(s) URL (PUT once at the end). */
  output: string;
  /** Where the failed requests go, as `output`. */
  errors: string;
  /** Engine, pipeline and limits (config/config.ts's loadConfig). */
  config: Config;
  logger?: pino.Logger;
  /** The lines' endpoint where the caller knows it (a line naming another is invalid); else the first line's. */
  endpoint?: Endpoint;
  /** The most requests the file may hold (default config.maxRequestsPerBatch). */
  maxRequests?: number;
  /**
   * What the caller knows of a file it made and checked line by line, each body as parseRequest checks it (a dataset
   * job's request lines): how many requests it holds and the model they name. The file is then not read once more
   * to be validated, and its bodies are not checked again before the result cache is asked.
   */
  validated?: { total: number; model?: string };
  /** Start afresh: without it, a run continues after the results a local output and error file hold. */
  overwrite?: boolean;
  /** Run again the error file's requests (it is kept as `<errors>.retried`). */
  retryFailed?: boolean;
  /** Aborting stops the run: no request begins any more, those computing finish and are written. */
  signal?: AbortSignal;
  httpRetry?: HttpRetry;
  /** How a model that cannot be found is told to be given (loadRegistry's hint and setting). */
  modelHint?: { hint?: string; setting?: string };
  /** Told what the run does, as it does it. */
  onEvent?: (event: RunEvent) => void;
}

/** What a run tells as it goes: for a progress bar or a log, never needed for its result. */
export type RunEvent =
  | { type: "downloaded"; from: string; bytes: number }
  /** An earlier run's results are kept: `requests` of them are not run again. */
  | { type: "continuing"; requests: number; retryFailed: boolean }
  /** --retry-failed moved the error file aside. */
  | { type: "retrying"; errors: string; keptAs: string }
  /** The model is up and the requests begin; an abort from now on is the run's drain. */
  | { type: "running"; total: number; endpoint: Endpoint; model: string; backend: string; earlier: Earlier | null }
  | { type: "progress"; progress: Progress }
  /** The last request finished (before the results are uploaded). */
  | { type: "ran"; progress: Progress };

/** What an earlier run of this input left in the output and error files, which this run continues after. */
export interface Earlier {
  requests: number;
  completed: number;
  failed: number;
  usage: TokenUsage;
}

export interface RunSummary {
  /** done: every request ran; nothing_to_run: each already had a result; nothing_to_retry: no error file. */
  stopped: "done" | "interrupted" | "nothing_to_run" | "nothing_to_retry";
  /** Unknown only where the run stopped before reading its input. */
  endpoint?: Endpoint;
  /** The model that ran the requests, as the models file names it. */
  model?: string;
  /** Requests in the input (0 where it was not read). */
  total: number;
  /** Requests with a result, those of an earlier run included, and their tokens. */
  completed: number;
  failed: number;
  usage: TokenUsage;
  earlier: Earlier | null;
  /** The result files as given, or null where none was written (no request completed, or none failed). */
  output: string | null;
  errors: string | null;
  /** The whole run, download and model load included (not the uploads of URL outputs after it). */
  seconds: number;
  /** The model's price in the models file, if it has one. */
  price?: Price;
  /** Why the run stopped early (an abort). */
  aborted?: AbortReason;
  /** Requests of this run answered without computing: from the result cache, or as a repeat of another line. */
  cached: number;
  /** Whether its requests began: the files were reset then where `overwrite` said so, and a resume continues them. */
  began: boolean;
}

/**
 * The runner's scope in the result cache (BATCH_DIR/cache/, the server's embedded store): its own, as no key runs it,
 * so its answers serve its runs and no server caller, and a server's keys' answers none of its runs.
 */
export const RUNNER_SCOPE = "runner";

/** Input a run cannot take, found before anything runs; a fault while it runs is any other error. */
export class InputError extends Error {
  constructor(
    message: string,
    /** no_input: no such file; invalid_file: see `validation`; model_not_served; foreign_results: the output is another file's; endpoint_not_served. */
    readonly reason: "no_input" | "invalid_file" | "model_not_served" | "foreign_results" | "endpoint_not_served" = "no_input",
  ) {
    super(message);
    this.name = "InputError";
  }
}

/** A file that is not a valid batch file: nothing ran. */
export class InvalidFileError extends InputError {
  constructor(readonly validation: ValidationResult) {
    super(`not a valid batch file (${validation.errorCount} problems); nothing was run`, "invalid_file");
    this.name = "InvalidFileError";
  }
}

/** The lines name a model the models file does not serve (or none). */
export class ModelNotServedError extends InputError {
  constructor(
    readonly model: string | undefined,
    readonly served: string[],
  ) {
    const named = model === undefined ? "the requests name no model" : `the model '${model}' is not in the models file`;
    super(`${named}; it serves ${served.join(", ")}`, "model_not_served");
    this.name = "ModelNotServedError";
  }
}

/** Why a run stopped at an abort: nothing more is written, and running again resumes. */
const INTERRUPTED: AbortReason = { code: "shutdown", message: "Interrupted." };
/** The drain of a run whose model, loaded at its first miss, could not come up: its unrun lines resume later. */
const MODEL_DOWN: AbortReason = { code: "shutdown", message: "The model could not be loaded." };

const NO_USAGE: TokenUsage = { promptTokens: 0, cachedTokens: 0, completionTokens: 0 };

/** What a run has learnt so far, for the summary an abort returns whenever it comes. */
interface RunState {
  o: RunFileOptions;
  started: number;
  files: { input: string; output: string; errors: string };
  endpoint?: Endpoint;
  total: number;
  earlier?: DoneScan;
  /** The requests began running: what stops them now is the run's drain, which ends in its own summary. */
  ran?: boolean;
  /** Requests of this run answered from the result cache or as a repeat. */
  cached: number;
}

/**
 * Runs a batch file to its output and error files and returns what it did. Throws InputError for input it cannot
 * take (nothing is changed then); an abort returns a summary with `stopped: "interrupted"`, and running again continues.
 */
export async function runFile(options: RunFileOptions): Promise<RunSummary> {
  // A folder only for the files at URLs: a run on local files leaves nothing behind even when it is killed.
  const remote = [options.input, options.output, options.errors].some(isUrl);
  const work = remote ? await mkdtemp(path.join(os.tmpdir(), "obi-run-")) : undefined;
  const local = (name: string, location: string) => (work && isUrl(location) ? path.join(work, name) : path.resolve(location));
  const files = {
    input: local("input.jsonl", options.input),
    output: local("output.jsonl", options.output),
    errors: local("errors.jsonl", options.errors),
  };
  const run: RunState = { o: options, started: Date.now(), files, total: 0, cached: 0 };
  try {
    return await runPhases(run);
  } catch (err) {
    // An abort before the requests run (a download, the model's load) ends the same way as one during the run.
    if (options.signal?.aborted && !run.ran) return await interrupted(run);
    throw err;
  } finally {
    if (work) await rm(work, { recursive: true, force: true });
  }
}

async function runPhases(run: RunState): Promise<RunSummary> {
  const { o, files } = run;
  await fetchInput(run);
  const endpoint = o.endpoint ?? (await detectEndpoint(files.input, o.config.maxLineBytes));
  run.endpoint = endpoint;
  const validation = o.validated ?? (await validated(files.input, endpoint, o));
  run.total = validation.total;
  if (o.signal?.aborted) return await interrupted(run);

  const earlier = await earlierResults(run);
  if (earlier === "nothing_to_retry") return { ...ended(run, "nothing_to_retry"), ...(await onDisk(run)) };
  if (earlier) run.earlier = earlier;

  const registry = await loadRegistry(o.config, o.logger ?? silent(), { ...o.modelHint, signal: o.signal });
  const spec = registry.resolve(validation.model);
  if (!spec) throw new ModelNotServedError(validation.model, registry.names);
  if (earlier && earlier.done.size >= validation.total) {
    // Every request already has its result: nothing to run, so no model is loaded (the lines' model was checked above).
    return { ...ended(run, "nothing_to_run"), model: spec.name, ...(await onDisk(run)) };
  }
  if (o.signal?.aborted) return await interrupted(run);

  const result = await runOnModel(run, registry, spec.name);
  // The run's time is its work's: the uploads after it are not counted.
  const summary = ended(run, result.aborted ? "interrupted" : "done");
  // Each file appears with its first line: a run where no request completed has no output file.
  const written = await onDisk(run, true);
  // What finished is delivered even after an abort.
  if (written.output && isUrl(o.output)) await upload(files.output, o.output, { retry: o.httpRetry });
  if (written.errors && isUrl(o.errors)) await upload(files.errors, o.errors, { retry: o.httpRetry });
  return {
    ...summary,
    model: spec.name,
    completed: result.completed,
    failed: result.failed,
    usage: result.usage,
    ...written,
    ...(spec.price ? { price: spec.price } : {}),
    ...(result.aborted ? { aborted: result.aborted } : {}),
  };
}

/** The file validated as POST /v1/batches validates one; InvalidFileError where it is not. */
async function validated(file: string, endpoint: Endpoint, o: RunFileOptions): Promise<{ total: number; model?: string }> {
  const validation = await validateBatchFile(file, endpoint, {
    maxRequests: o.maxRequests ?? o.config.maxRequestsPerBatch,
    maxLineBytes: o.config.maxLineBytes,
  });
  if (!validation.ok) throw new InvalidFileError(validation);
  return validation;
}

async function fetchInput(run: RunState): Promise<void> {
  const { o } = run;
  if (isUrl(o.input)) {
    const bytes = await download(o.input, run.files.input, { retry: o.httpRetry, signal: o.signal });
    o.onEvent?.({ type: "downloaded", from: o.input, bytes });
    return;
  }
  const s = await stat(run.files.input).catch(() => null);
  if (!s?.isFile()) throw new InputError(`no such input file: ${run.files.input}`);
}

/** The summary's common part: what the earlier run left counts as this one's until this one runs. */
function ended(run: RunState, stopped: RunSummary["stopped"]): RunSummary {
  const earlier = run.earlier ? toEarlier(run.earlier) : null;
  return {
    stopped,
    ...(run.endpoint ? { endpoint: run.endpoint } : {}),
    total: run.total,
    completed: earlier?.completed ?? 0,
    failed: earlier?.failed ?? 0,
    usage: earlier?.usage ?? NO_USAGE,
    earlier,
    output: null,
    errors: null,
    seconds: (Date.now() - run.started) / 1000,
    cached: run.cached,
    began: run.ran === true,
  };
}

const toEarlier = (scan: DoneScan): Earlier => ({
  requests: scan.done.size,
  completed: scan.completed,
  failed: scan.failed,
  usage: scan.usage,
});

/**
 * The result files that exist, as the caller named them. Before a run, a URL holds nothing of this run's (it is
 * written only at a run's end); after one, the local copies say what is uploaded.
 */
async function onDisk(run: RunState, afterRun = false): Promise<{ output: string | null; errors: string | null }> {
  const { o, files } = run;
  const has = async (location: string, file: string) => (afterRun || !isUrl(location)) && (await exists(file));
  return { output: (await has(o.output, files.output)) ? o.output : null, errors: (await has(o.errors, files.errors)) ? o.errors : null };
}

/**
 * What an earlier run of this input left (null: nothing, a fresh run), or that there is nothing to retry. Nothing is
 * changed yet (prepareFiles does, as the run begins), so a run that never begins leaves the files as they were.
 */
async function earlierResults(run: RunState): Promise<DoneScan | null | "nothing_to_retry"> {
  const { o, files } = run;
  if (o.retryFailed && !(await exists(files.errors))) return "nothing_to_retry";
  // The failed lines are run again, so only the output's count as done.
  const scan = o.overwrite ? null : await resumable(files.input, files.output, o.retryFailed ? null : files.errors, o.config.maxLineBytes);
  if (scan && "foreign" in scan) {
    throw new InputError(
      `${displayLocation(o.output)} holds results for requests that are not in ${displayLocation(o.input)} ` +
        `(such as '${scan.foreign}'): pass --overwrite to replace them`,
      "foreign_results",
    );
  }
  if (scan && scan.done.size > 0) o.onEvent?.({ type: "continuing", requests: scan.done.size, retryFailed: !!o.retryFailed });
  return scan;
}

/**
 * The result files made ready as the requests begin: --retry-failed moves the error file aside (its lines run again),
 * a fresh run removes earlier results; the output and the error file then appear with their first line.
 */
async function prepareFiles(run: RunState): Promise<void> {
  const { o, files } = run;
  await mkdir(path.dirname(files.output), { recursive: true });
  if (o.retryFailed) {
    await rename(files.errors, `${files.errors}.retried`);
    o.onEvent?.({ type: "retrying", errors: o.errors, keptAs: `${path.basename(files.errors)}.retried` });
  } else if (!run.earlier) {
    await rm(files.output, { force: true });
    await rm(files.errors, { force: true });
  }
}

/**
 * Brings the model up and runs the lines on it. An abort while the model loads stops the load; one while the lines
 * run is the run's drain: no request begins any more, and those computing finish and are written.
 */
async function runOnModel(run: RunState, registry: ModelRegistry, model: string): Promise<RunBatchResult> {
  const { o, files, earlier } = run;
  const endpoint = run.endpoint!;
  // A model loaded at its first miss that cannot come up stops the run as an interrupt does (what ran is kept,
  // the rest resumes), and the run then fails as a load at start would.
  const modelDown = new AbortController();
  let loadFailure: Error | undefined;
  // A model loaded at a miss loads within the lines' time, which the rate leaves out as it does a load at start.
  let lazyLoadMs = 0;
  const results = await openCache(run, {
    onLazyLoaded: (ms) => (lazyLoadMs = ms),
    onLazyLoadFailure: (err) => {
      loadFailure ??= err;
      modelDown.abort(MODEL_DOWN);
    },
  });
  const drain = o.signal ? AbortSignal.any([o.signal, modelDown.signal]) : modelDown.signal;
  const router = await createRouter(o.config, registry, o.logger ?? silent(), process.env, results).catch(async (err) => {
    await results?.cache.close();
    throw err;
  });
  try {
    const lease = await router.acquire(model, o.signal);
    const backend = results ? withCacheOptions(lease.backend, { cacheScope: RUNNER_SCOPE }) : lease.backend;
    if (!backend.info.endpoints.includes(endpoint)) {
      throw new InputError(
        `${endpoint} is not served by this backend (it serves ${backend.info.endpoints.join(", ")})`,
        "endpoint_not_served",
      );
    }
    run.ran = true;
    await prepareFiles(run);
    const { model: name, summary } = backend.info;
    o.onEvent?.({
      type: "running",
      total: run.total,
      endpoint,
      model: name,
      backend: summary,
      earlier: earlier ? toEarlier(earlier) : null,
    });
    const began = Date.now();
    const result = await runBatchFile({
      inputPath: files.input,
      outputPath: files.output,
      errorPath: files.errors,
      endpoint,
      backend,
      batchSize: o.config.pipeline.batchSize,
      concurrency: o.config.pipeline.concurrency,
      order: o.config.pipeline.order,
      // Nothing cuts a request short: a second Ctrl-C ends the process, and a resume cuts a torn last line.
      drain,
      ...(earlier ? { done: earlier.done, base: earlier } : {}),
      // A file its maker checked line by line had each body checked as a request is.
      ...(o.validated ? { bodiesChecked: true } : {}),
      onProgress: (progress) => o.onEvent?.({ type: "progress", progress }),
    });
    if (loadFailure) throw loadFailure;
    o.onEvent?.({ type: "ran", progress: result });
    // A plan's rate is this machine's: a record it cannot write costs the next plan its accuracy, not this run.
    if (measuresTheModel(result, earlier ?? undefined))
      await recordRate(o.config.batchDir, name, runWork(result, earlier ?? undefined), (Date.now() - began - lazyLoadMs) / 1000).catch(
        () => undefined,
      );
    lease.release();
    return result;
  } finally {
    await router.close();
    await results?.cache.close();
  }
}

/**
 * Whether a run's time measures the model: not where the cache answered more than a tenth of its lines, whose
 * reading takes time the model's computing does not.
 */
function measuresTheModel(result: RunBatchResult, earlier: Progress | undefined): boolean {
  const lines = result.completed + result.failed - (earlier ? earlier.completed + earlier.failed : 0);
  const cached = (result.cached?.lines ?? 0) - (earlier?.cached?.lines ?? 0);
  return cached <= lines / 10;
}

/** The server's embedded result cache (BATCH_DIR/cache/), unless RESULT_CACHE is off (the runner's --no-cache). */
async function openCache(run: RunState, lazy: Pick<BackendCache, "onLazyLoaded" | "onLazyLoadFailure">): Promise<BackendCache | undefined> {
  const { config } = run.o;
  if (!config.resultCache.enabled) return undefined;
  const log = run.o.logger ?? silent();
  // A cache that cannot be opened (BATCH_DIR not writable) costs the run its reuse, not the run.
  const opened = await openEmbeddedCache(config.batchDir, config.resultCache).catch((err: Error) => {
    log.warn(
      { dir: config.batchDir, err: err.message },
      "the result cache cannot be opened: every request computes (--no-cache says so quietly)",
    );
    return undefined;
  });
  if (!opened) return undefined;
  if (opened.damaged) log.warn(opened.damaged);
  return {
    ...opened,
    // A re-run answered wholly from the cache loads no model.
    lazyLoad: true,
    ...lazy,
    onOutcome: (outcome) => {
      if (outcome === "hit" || outcome === "duplicate") run.cached++;
    },
    onStoreError: (err) => log.warn({ err }, "the result cache failed a read or a write: the request computed"),
  };
}

/** The summary of a run stopped before its requests ran: what the files hold from before. */
async function interrupted(run: RunState): Promise<RunSummary> {
  return { ...ended(run, "interrupted"), ...(await onDisk(run)), aborted: INTERRUPTED };
}

/** The endpoint named by the first line; validation then holds every other line to it. */
export async function detectEndpoint(file: string, maxLineBytes: number): Promise<Endpoint> {
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

async function exists(file: string): Promise<boolean> {
  return (await stat(file).catch(() => null)) !== null;
}

const silent = () => pino({ level: "silent" });

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
