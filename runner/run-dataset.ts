// A dataset job, stage by stage: the table's rows rendered into request lines, run as a batch file (here through
// the offline runner, or on a server through OpenAI's Files and Batches API), and the answers joined back into the
// table. A stage's working files sit in `<output>.work/`; the output itself appears only whole, by rename.
import { mkdir, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { openDuckTables } from "../datasets/duckdb-tables.js";
import { checkFlags, type Job, JobError, planStages, readJobFile } from "../datasets/job.js";
import { jobHash, loadHook, type Postprocess, type Preprocess, requestLines, writeRequests } from "../datasets/requests.js";
import { resultColumns } from "../datasets/results.js";
import { joinAnswers, keptColumns } from "../datasets/stage.js";
import { DatasetError, type TableInput, type Tables } from "../datasets/tables.js";
import { readJsonFile, writeJsonAtomic } from "../stores/atomic-json.js";
import type { EngineArgs } from "./args.js";
import type { DatasetArgs } from "./dataset-args.js";
import { runRemoteBatch } from "./remote-batch.js";
import { type OfflineRunDeps, runOffline } from "./run-offline.js";

/** What `<output>.work/job.json` records: which job the working files belong to, and whether the output is whole. */
interface StageState {
  hash: string;
  rows: number;
  complete: boolean;
  /** The server's batch, in --remote mode, so a rerun follows it instead of submitting again. */
  remoteBatch?: string;
}

export async function runDataset(args: DatasetArgs<EngineArgs>, deps: OfflineRunDeps): Promise<number> {
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
    const code = await runStage(job, name, args, deps).catch((err) => {
      if (err instanceof DatasetError || err instanceof JobError) return fail(stderr, err.message, 1);
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

async function runStage(job: Job, name: string, args: DatasetArgs<EngineArgs>, deps: OfflineRunDeps): Promise<number> {
  const work = `${job.output}.work`;
  const stateFile = path.join(work, "job.json");
  let state = args.engine.overwrite ? undefined : await readState(stateFile);
  if (args.engine.overwrite && !args.dryRun) await rm(work, { recursive: true, force: true });
  else if (!state && (await exists(job.output)) && !args.dryRun)
    throw new DatasetError(`${job.output}: exists and is not this job's: --overwrite replaces it`);
  // A dry run leaves nothing behind, not even the working folder.
  if (!args.dryRun) await mkdir(work, { recursive: true });
  const tables = await openDuckTables({ tempDir: args.dryRun ? os.tmpdir() : work });
  try {
    const input = await tables.open(job);
    const label = input.files.length === 1 ? input.files[0] : job.input;
    const keep = keptColumns(job, input.columns, label);
    const hash = await jobHash(job, input.files);
    const preprocess = job.preprocess ? await loadHook<Preprocess>(job.preprocess, "preprocess") : undefined;
    const postprocess = job.postprocess ? await loadHook<Postprocess>(job.postprocess, "postprocess") : undefined;
    if (args.dryRun) return await dryRun(job, input, { hash, label, preprocess, keep }, deps);

    // Another version's working files are replaced when they hold no answer yet (it stopped before running).
    // A batch a server runs has no answer here until it ends: another version's batch is never followed.
    if (state && state.hash !== hash && !(await hasResults(work)) && !state.remoteBatch) {
      await rm(work, { recursive: true, force: true });
      await mkdir(work);
      state = undefined;
    } else if (state && state.hash !== hash)
      throw new DatasetError(
        `${work}: holds the results of another version of this job (its template, parameters or input changed): --overwrite starts afresh`,
      );
    if (state?.complete && (await exists(job.output)) && !args.retryFailed) {
      deps.stderr.write(`${name}: ${job.output} is complete already (${state.rows} rows); --overwrite runs it again\n`);
      return 0;
    }
    const requests = path.join(work, "requests.jsonl");
    const rows = await writeRequests(job, input, requests, { hash, label, preprocess });
    await saveState(stateFile, { ...state, hash, rows, complete: false });
    deps.stderr.write(`${name}: ${rows} rows of ${label} -> ${job.output}\n`);

    const output = path.join(work, "output.jsonl");
    const errors = path.join(work, "errors.jsonl");
    const code = args.remote
      ? await runRemoteBatch({ requests, output, errors, stateFile, endpoint: job.endpoint, remote: args.remote }, deps)
      : (
          await runOffline(
            { ...args.engine, input: requests, output, errors, ...(args.retryFailed ? { retryFailed: true } : {}) },
            {
              ...deps,
              config: { ...deps.config, maxRequestsPerBatch: Math.max(deps.config.maxRequestsPerBatch, rows) },
              resultFiles: false,
              inputLabel: label,
            },
          )
        ).exitCode;
    if (code !== 0) return code;
    return await joinBack(job, tables, input, { hash, rows, keep, output, errors, work, stateFile, postprocess, name }, deps);
  } finally {
    await tables.close();
  }
}

async function joinBack(
  job: Job,
  tables: Tables,
  input: TableInput,
  s: Parameters<typeof joinAnswers>[3] & { stateFile: string; name: string },
  deps: OfflineRunDeps,
): Promise<number> {
  const pass = await joinAnswers(job, tables, input, s);
  const state = await readState(s.stateFile);
  await saveState(s.stateFile, { ...(state ?? { hash: s.hash, rows: s.rows }), complete: true });
  deps.stdout.write(
    `${s.name}: wrote ${job.output}: ${s.rows} rows (${pass.completed} answered, ${pass.failed} with an error in error_code)\n`,
  );
  return 0;
}

async function dryRun(
  job: Job,
  input: TableInput,
  o: { hash: string; label: string; preprocess?: Preprocess; keep: string[] },
  deps: OfflineRunDeps,
): Promise<number> {
  const out: string[] = [`${o.label}: ${await input.count()} rows${job.where ? ` where ${job.where}` : ""}; the first requests:`];
  for await (const lines of requestLines(job, input, { hash: o.hash, label: o.label, preprocess: o.preprocess, max: 3 })) {
    for (const line of lines) out.push(JSON.stringify(JSON.parse(line), null, 2));
  }
  const types = new Map(input.columns.map((c) => [c.name, c.type]));
  out.push(`${job.output} will hold these columns:`);
  for (const name of o.keep) out.push(`  ${name}: ${types.get(name)} (input)`);
  for (const c of resultColumns(job)) out.push(`  ${c.name}: ${c.type}`);
  if (job.postprocess) out.push(`  ... and the columns ${path.basename(job.postprocess)} returns`);
  deps.stdout.write(`${out.join("\n")}\n`);
  return 0;
}

/** The stage's state, or none (no file yet, or one this runner cannot read: the stage then starts as new). */
const readState = (file: string) =>
  readJsonFile(file).then(
    (v) => v as StageState | undefined,
    () => undefined,
  );
const saveState = (file: string, state: StageState) => writeJsonAtomic(file, state);

async function hasResults(work: string): Promise<boolean> {
  for (const f of ["output.jsonl", "errors.jsonl"]) if (((await stat(path.join(work, f)).catch(() => null))?.size ?? 0) > 0) return true;
  return false;
}

async function exists(file: string): Promise<boolean> {
  return (await stat(file).catch(() => null)) !== null;
}
