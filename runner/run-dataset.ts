// A dataset job, stage by stage: the table's rows rendered into request lines, run as a batch file (here through
// the offline runner, or on a server through OpenAI's Files and Batches API), and the answers joined back into the
// table. A stage's working files sit in a folder named after the job (dataset-work.ts), removed once the output is
// whole; the output itself appears only whole, by rename.
import { mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { type BegunDatabase, discardDatabase, openDuckTables } from "../datasets/duckdb-tables.js";
import { checkFlags, type Job, JobError, planStages, readJobFile } from "../datasets/job.js";
import { jobHash, loadHook, type Postprocess, type Preprocess, type WrittenRequests, writeRequests } from "../datasets/requests.js";
import { joinAnswers, joinEarlier, joinResults, type NamedColumn, type OutputColumns, outputColumns } from "../datasets/stage.js";
import { DatasetError, type TableInput, type Tables } from "../datasets/tables.js";
import type { EngineArgs } from "./args.js";
import { type JobAnswers, type JobSource, jobSource, recallAnswers, rememberAnswers, rememberable } from "./dataset-answers.js";
import type { DatasetArgs } from "./dataset-args.js";
import { previewJob } from "./dataset-preview.js";
import {
  earlierOutput,
  hasResults,
  holdStage,
  postprocessHash,
  readState,
  type StagePlace,
  type StageState,
  saveState,
  stagePlace,
  tidy,
  writtenOutput,
} from "./dataset-work.js";
import { formatPlan, planLocal } from "./plan-file.js";
import { runRemoteBatch } from "./remote-batch.js";
import { modelHint, type OfflineRunDeps, printedRun } from "./run-offline.js";
import { servedBy } from "./served-by.js";

export { beginDatabase, discardDatabase } from "../datasets/duckdb-tables.js";

/** `begun`: a database begun for the job (beginDatabase), its first stage's; one no stage takes is closed here. */
export async function runDataset(args: DatasetArgs<EngineArgs>, deps: OfflineRunDeps, begun?: BegunDatabase): Promise<number> {
  let spare = begun;
  const take = () => {
    const b = spare;
    spare = undefined;
    return b;
  };
  try {
    return await runStages(args, deps, take);
  } finally {
    const left = take();
    if (left) discardDatabase(left);
  }
}

async function runStages(args: DatasetArgs<EngineArgs>, deps: OfflineRunDeps, take: () => BegunDatabase | undefined): Promise<number> {
  const { stderr } = deps;
  let jobs: Job[];
  try {
    const file = args.jobFile ? await readJobFile(args.jobFile) : undefined;
    jobs = planStages(file?.fields, file?.dir ?? args.cwd, checkFlags(args.flags), args.cwd);
  } catch (err) {
    if (err instanceof JobError) return fail(stderr, err.message, 2);
    throw err;
  }
  for (const [i, job] of jobs.entries()) {
    const name = jobs.length > 1 ? `stage ${i + 1} of ${jobs.length}` : "job";
    if (args.dryRun && i > 0) {
      stderr.write(`${name}: reads ${job.input}, which the stage before writes; not shown by --dry-run\n`);
      continue;
    }
    const run = args.dryRun ? dryRun(job, args, deps) : runStage(job, name, args, deps, take);
    const code = await run.catch((err) => {
      // Input the runner cannot take is a usage error (2), as a bad flag is; a read stopped at a limit is not.
      if (err instanceof JobError) return fail(stderr, err.message, 2);
      if (err instanceof DatasetError) return fail(stderr, err.message, err.bound ? 1 : 2);
      throw err;
    });
    if (code !== 0) return code;
  }
  return 0;
}

function fail(stderr: { write(t: string): unknown }, message: string, code: number): number {
  stderr.write(`error: ${message}\n`);
  return code;
}

/**
 * A dry run reads the input, renders its first rows, and plans the whole job as `--plan` plans a batch file (its
 * rows rendered into a temporary file, counted with the model's tokenizer, the answers the cache holds counted as
 * cached): it runs nothing and leaves nothing behind, not even a working folder.
 */
async function dryRun(job: Job, args: DatasetArgs<EngineArgs>, deps: OfflineRunDeps): Promise<number> {
  const temp = await mkdtemp(path.join(os.tmpdir(), "obi-dry-run-"));
  const tables = await openDuckTables({ tempDir: temp });
  try {
    const input = await tables.open(job);
    const label = input.files.length === 1 ? input.files[0] : job.input;
    const columns = outputColumns(job, input.columns, label);
    const hash = await jobHash(job, input.files, await servedBy(deps.config, args.remote?.url));
    const preprocess = job.preprocess ? await loadHook<Preprocess>(job.preprocess, "preprocess") : undefined;
    if (job.postprocess) await loadHook<Postprocess>(job.postprocess, "postprocess");
    const pre = preprocess ? { preprocess } : {};
    deps.stdout.write(await previewJob(job, tables, input, { hash, label, columns, ...pre }));
    if (args.remote) {
      deps.stdout.write(`plan: POST /v1/batches/plan on ${args.remote.url} plans it where it would run\n`);
      return 0;
    }
    const requests = path.join(temp, "requests.jsonl");
    const sizes = { maxLineBytes: deps.config.maxLineBytes, maxFileBytes: Number.POSITIVE_INFINITY };
    const { rows } = await writeRequests(job, input, requests, { hash, label, sizes, ...pre });
    const config = { ...deps.config, maxRequestsPerBatch: Math.max(rows, 1) };
    const plan = await planLocal(requests, job.endpoint, {
      config,
      logger: deps.logger,
      modelHint: modelHint(deps.config, args.engine),
      ...(deps.signal ? { signal: deps.signal } : {}),
    });
    deps.stdout.write(formatPlan(plan));
    return 0;
  } finally {
    await tables.close();
    await rm(temp, { recursive: true, force: true });
  }
}

/** What a stage knows once its input is open. */
interface Opened {
  job: Job;
  name: string;
  place: StagePlace;
  tables: Tables;
  input: TableInput;
  label: string;
  columns: OutputColumns;
  /** What answers the rows (servedBy), part of the hash. */
  served: string;
  hash: string;
  postprocess?: Postprocess;
  postHash: string | null;
  /** What its answers are of, where they may be remembered whole (runner/dataset-answers.ts). */
  source?: JobSource;
}

async function runStage(
  job: Job,
  name: string,
  args: DatasetArgs<EngineArgs>,
  deps: OfflineRunDeps,
  take: () => BegunDatabase | undefined,
): Promise<number> {
  const place = stagePlace(job);
  const release = await holdStage(place, (err) => deps.stderr.write(`${name}: warning: the job's lock was lost (${err.message})\n`));
  try {
    return await runHeld(job, name, place, args, deps, take);
  } finally {
    await release().catch(() => undefined);
  }
}

async function runHeld(
  job: Job,
  name: string,
  place: StagePlace,
  args: DatasetArgs<EngineArgs>,
  deps: OfflineRunDeps,
  take: () => BegunDatabase | undefined,
): Promise<number> {
  if (args.engine.overwrite) {
    await rm(place.work, { recursive: true, force: true });
    await rm(place.record, { force: true });
  }
  await mkdir(place.work, { recursive: true });
  const begun = take();
  const tables = await openDuckTables({ tempDir: place.work, ...(begun ? { begun } : {}) });
  try {
    const input = await tables.open(job);
    const label = input.files.length === 1 ? input.files[0] : job.input;
    const columns = outputColumns(job, input.columns, label);
    if (columns.note) deps.stderr.write(`${name}: ${columns.note}\n`);
    const served = await servedBy(deps.config, args.remote?.url);
    const hash = await jobHash(job, input.files, served);
    const preprocess = job.preprocess ? await loadHook<Preprocess>(job.preprocess, "preprocess") : undefined;
    const postprocess = job.postprocess ? await loadHook<Postprocess>(job.postprocess, "postprocess") : undefined;
    const o: Opened = { job, name, place, tables, input, label, columns, served, hash, postHash: await postprocessHash(job) };
    if (postprocess) o.postprocess = postprocess;
    const before = await readState(place.record);
    const state = await stateOf(o, args);
    const written = await writtenOutput(state, job.output);
    if (written?.current && written.postprocess === o.postHash && !args.retryFailed) {
      deps.stderr.write(`${name}: ${job.output} is complete already (${state!.rows} rows); --overwrite runs it again\n`);
      return 0;
    }
    if (!written && !args.engine.overwrite && (await exists(job.output)))
      throw new DatasetError(
        earlierOutputs(before).includes(job.output)
          ? `${job.output}: was written by an earlier version of this job (its input or model changed since): --overwrite replaces it`
          : `${job.output}: exists and is not this job's: --overwrite replaces it`,
      );
    const answers = await hasResults(place.work);
    const earlier = answers ? undefined : await earlierOutput(state, o.postHash);
    if (args.retryFailed && !answers && earlier) return nothingToRetry(o, earlier, deps);
    // --no-cache asks for every row computed: another output's answers would be reuse too.
    if (earlier && state && !args.retryFailed && !args.engine.noCache) return await joinFromEarlier(o, state, earlier, deps);
    // A job with no answer yet has nothing to retry: its rows run as new.
    const asked = { ...args, retryFailed: args.retryFailed && answers };
    if (rememberable(job, deps.config, asked)) {
      o.source = await jobSource(job, input.files, served, deps.config.batchDir).catch(() => undefined);
      const remembered = o.source && !answers && (await recallAnswers(o.source, deps.config, deps.logger));
      if (remembered) return await joinRemembered(o, remembered, args, deps);
    }
    return await runAndJoin(o, preprocess, asked, deps);
  } finally {
    await tables.close();
    await tidy(place);
  }
}

/** The stage's record, once it is this version's: another version's is replaced while it holds no answer, else refused. */
async function stateOf(o: Opened, args: DatasetArgs<EngineArgs>): Promise<StageState | undefined> {
  const state = await readState(o.place.record);
  if (!state || state.hash === o.hash) return state;
  // A batch a server runs has no answer here until it ends: another version's batch is never followed.
  // The record stays until this version writes its own (runAndJoin): a run refused or failed before then leaves the
  // earlier version's outputs known as the job's.
  if (!(await hasResults(o.place.work)) && !state.remoteBatch) {
    await rm(o.place.work, { recursive: true, force: true });
    await mkdir(o.place.work);
    return undefined;
  }
  if (args.engine.overwrite) return undefined;
  throw new DatasetError(
    `${o.place.work}: holds the results of another version of this job (its input or model changed since): --overwrite starts afresh`,
  );
}

/** The rows rendered into request lines, run here or on a server, and the answers joined into the output. */
async function runAndJoin(o: Opened, preprocess: Preprocess | undefined, args: DatasetArgs<EngineArgs>, deps: OfflineRunDeps) {
  const { job, place } = o;
  const requests = `${place.work}/requests.jsonl`;
  // A row past MAX_LINE_BYTES is named here, by its row, rather than as a line of an invalid batch file.
  const sizes = { maxLineBytes: deps.config.maxLineBytes, maxFileBytes: Number.POSITIVE_INFINITY };
  const written = await writeRequests(job, o.input, requests, {
    hash: o.hash,
    label: o.label,
    sizes,
    ...(preprocess ? { preprocess } : {}),
  });
  const { rows } = written;
  const state = await readState(place.record);
  await saveState(
    place.record,
    state?.hash === o.hash ? { ...state, rows } : { hash: o.hash, rows, earlierOutputs: earlierOutputs(state) },
  );
  deps.stderr.write(`${o.name}: ${rows} rows of ${o.label} -> ${job.output} (working files in ${place.work})\n`);
  const output = `${place.work}/output.jsonl`;
  const errors = `${place.work}/errors.jsonl`;
  const code = args.remote
    ? await runRemoteBatch(
        { requests, output, errors, stateFile: place.record, endpoint: job.endpoint, remote: args.remote, noCache: args.engine.noCache },
        deps,
      )
    : await runHere(o, { requests, output, errors, written }, args, deps);
  if (code !== 0) return code;
  const pass = await joinedUnchanged(o, () =>
    joinAnswers(job, o.tables, o.input, {
      columns: o.columns,
      rows,
      hash: o.hash,
      output,
      errors,
      work: place.work,
      ...(o.postprocess ? { postprocess: o.postprocess } : {}),
    }),
  );
  // Only a retry changes answers an output already holds: the outputs written before it are then stale.
  await record(o, { columns: pass.named, answered: pass.completed, failed: pass.failed }, args.retryFailed);
  if (o.source && pass.failed === 0 && !args.remote) {
    const results = { requests, results: `${place.work}/results.jsonl`, columns: pass.columns, rows };
    await rememberAnswers(o.source, results, deps.config, deps.logger);
  }
  const errorColumn = o.columns.results.find((c) => c.name === "error_code")?.as ?? "error_code";
  deps.stdout.write(
    `${o.name}: wrote ${job.output}: ${rows} rows (${pass.completed} answered, ${pass.failed} with an error in ${errorColumn})\n`,
  );
  return finish(o, pass.failed, args, deps);
}

/** The working folder removed once every row is answered, unless --keep-work keeps it. */
async function finish(o: Opened, failed: number, args: DatasetArgs<EngineArgs>, deps: OfflineRunDeps): Promise<number> {
  const { place } = o;
  if (failed === 0 && !args.keepWork) {
    await rm(place.work, { recursive: true, force: true });
    deps.stderr.write(`${o.name}: removed the working folder ${place.work} (--keep-work keeps it)\n`);
  } else
    deps.stderr.write(
      `${o.name}: kept the working folder ${place.work}${failed > 0 ? ` for --retry-failed (${failed} rows failed)` : ""}; remove it once done\n`,
    );
  return 0;
}

/** A job whose answers the result cache holds whole: its results joined to the input, nothing rendered or run. */
async function joinRemembered(o: Opened, answers: JobAnswers, args: DatasetArgs<EngineArgs>, deps: OfflineRunDeps): Promise<number> {
  const { job, place } = o;
  const { rows, usage } = answers;
  const state = await readState(place.record);
  await saveState(
    place.record,
    state?.hash === o.hash ? { ...state, rows } : { hash: o.hash, rows, earlierOutputs: earlierOutputs(state) },
  );
  deps.stderr.write(
    `${o.name}: ${rows} rows of ${o.label} -> ${job.output}: every answer is in the result cache, from a run of this job on the same input and model (--no-cache computes them)\n`,
  );
  const results = `${place.work}/results.jsonl`;
  await writeFile(results, answers.results);
  const named = await joinedUnchanged(o, () =>
    joinResults(job, o.tables, o.input, { columns: o.columns, rows, results, of: answers.columns }),
  );
  await record(o, { columns: named, answered: rows, failed: 0 }, false);
  deps.stdout.write(
    `${o.name}: wrote ${job.output}: ${rows} rows (${rows} answered from the result cache: ${usage.promptTokens} prompt tokens, all cached, and ${usage.completionTokens} completion tokens)\n`,
  );
  await rm(place.work, { recursive: true, force: true });
  if (args.keepWork) deps.stderr.write(`${o.name}: no request was written or run, so the working folder held nothing to keep\n`);
  return 0;
}

/**
 * The request lines run here, on the endpoint the job names and with no limit on their count but the table's: the
 * summary leaves out the working files (the table is the job's output), and problems name the table.
 */
async function runHere(
  o: Opened,
  files: { requests: string; output: string; errors: string; written: WrittenRequests },
  args: DatasetArgs<EngineArgs>,
  deps: OfflineRunDeps,
): Promise<number> {
  const e = args.engine;
  const { rows, model, mixedModels } = files.written;
  const options = {
    input: files.requests,
    output: files.output,
    errors: files.errors,
    config: deps.config,
    logger: deps.logger,
    endpoint: o.job.endpoint,
    maxRequests: rows,
    // Each line was made here and checked as its endpoint checks a request: the file is not read again to validate
    // it, unless its lines name several models, which validation refuses as a batch does.
    ...(mixedModels ? {} : { validated: { total: rows, ...(model !== undefined ? { model } : {}) } }),
    overwrite: !!e.overwrite,
    retryFailed: !!args.retryFailed,
    modelHint: modelHint(deps.config, e),
  };
  const view = { label: o.label, resultFiles: false, ...(e.pool ? { pool: e.pool } : {}) };
  return (await printedRun(options, deps, view)).exitCode;
}

/**
 * --retry-failed once the working folder is gone: it goes only when every row was answered, so there is nothing to
 * retry; a folder removed by hand took the failed rows' lines with it.
 */
function nothingToRetry(o: Opened, earlier: { file: string; written: { failed: number } }, deps: OfflineRunDeps): number {
  if (earlier.written.failed > 0)
    throw new DatasetError(
      `${o.place.work}: is gone, and with it the lines of the ${earlier.written.failed} failed rows of ${earlier.file}: --overwrite runs the job again`,
    );
  deps.stderr.write(`${o.name}: nothing to retry: every row of ${earlier.file} was answered\n`);
  return 0;
}

/** Another format (or other kept columns) of answers this job already has in an earlier output: nothing runs again. */
async function joinFromEarlier(
  o: Opened,
  state: StageState,
  earlier: { file: string; written: { columns: NamedColumn[]; answered: number; failed: number } },
  deps: OfflineRunDeps,
): Promise<number> {
  const named = await joinedUnchanged(o, () =>
    joinEarlier(o.job, o.tables, o.input, {
      columns: o.columns,
      rows: state.rows,
      from: earlier.file,
      earlier: earlier.written.columns,
    }),
  );
  await record(o, { columns: named, answered: earlier.written.answered, failed: earlier.written.failed }, false);
  deps.stdout.write(`${o.name}: wrote ${o.job.output}: ${state.rows} rows, joined from ${earlier.file} (no row ran again)\n`);
  return 0;
}

/**
 * A join of answers to the input, as long as the input is the one the job read (its files' sizes and times, as its
 * hash counts them): answers are joined by their row's place, so those of an input replaced meanwhile would sit
 * beside other rows. An output written from one that changed during the join is removed.
 */
async function joinedUnchanged<T>(o: Opened, join: () => Promise<T>): Promise<T> {
  const changed = async () => (await jobHash(o.job, o.input.files, o.served).catch(() => "")) !== o.hash;
  const refusal = (what: string) =>
    new DatasetError(
      `${o.label}: changed while ${what} (its size or modification time is not what the job read): run the job again with --overwrite (the rows answered so far are in the result cache)`,
    );
  if (await changed()) throw refusal("the job ran, so its answers were not joined to it");
  const joined = await join();
  if (!(await changed())) return joined;
  await rm(o.job.output, { force: true });
  throw refusal(`its answers were joined to it, so ${o.job.output} was removed`);
}

/** The output, written whole, into the stage's record; `fresh` answers (a retry's) are a new version of them. */
async function record(o: Opened, w: { columns: NamedColumn[]; answered: number; failed: number }, fresh: boolean): Promise<void> {
  const s = await stat(o.job.output);
  const state = (await readState(o.place.record)) ?? { hash: o.hash, rows: 0 };
  const version = (state.version ?? 0) + (fresh ? 1 : 0);
  const entry = { size: s.size, mtimeMs: s.mtimeMs, postprocess: o.postHash, version, ...w };
  await saveState(o.place.record, { ...state, version, outputs: { ...state.outputs, [o.job.output]: entry } });
}

/** The outputs a record knows as the job's, of its version and of earlier ones. */
const earlierOutputs = (state: StageState | undefined): string[] =>
  state ? [...new Set([...Object.keys(state.outputs ?? {}), ...(state.earlierOutputs ?? [])])] : [];

async function exists(file: string): Promise<boolean> {
  return (await stat(file).catch(() => null)) !== null;
}
