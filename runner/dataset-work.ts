// A dataset stage's working folder and its record, both named after the job (not the output) beside the output:
// the folder holds the request and result lines while the job runs, and goes once the output is whole; the record
// remembers the outputs written from the job's answers, so that another format of them is joined from one.
import { createHash } from "node:crypto";
import { mkdir, readFile, rm, stat } from "node:fs/promises";
import path from "node:path";
import type { Job } from "../datasets/job.js";
import { jobKey } from "../datasets/requests.js";
import type { NamedColumn } from "../datasets/stage.js";
import { DatasetError } from "../datasets/tables.js";
import { readJsonFile, writeJsonAtomic } from "../stores/atomic-json.js";

/** An output written whole from the job's answers, as it was then: a later change makes it the user's file. */
export interface WrittenOutput {
  size: number;
  mtimeMs: number;
  /** Its result columns by their names in it (the postprocess module's last). */
  columns: NamedColumn[];
  /** The postprocess module's content hash: another module's columns cannot be joined from this output. */
  postprocess: string | null;
  answered: number;
  failed: number;
  /** The answers' version it holds: a retry's new answers make the outputs written before them stale. */
  version: number;
}

/** What the record holds: which version of the job the working files belong to, and the outputs written. */
export interface StageState {
  hash: string;
  rows: number;
  /** The server's batch, in --remote mode, so a rerun follows it instead of submitting again. */
  remoteBatch?: string;
  outputs?: Record<string, WrittenOutput>;
  /** The version of the answers last joined into an output. */
  version?: number;
  /** Outputs written by earlier versions of the job (its input or model since changed): named so when refused. */
  earlierOutputs?: string[];
}

export interface StagePlace {
  /** `<input>.<key>.work/` beside the output. */
  work: string;
  /** `.<input>.<key>.json` beside the output. */
  record: string;
}

/**
 * How long the lock of a run that ended without releasing it (a kill -9) holds, as proper-lockfile counts it: a run
 * finding the lock held tries again for a little longer than this, so it takes over a dead run's lock by itself.
 */
export const STAGE_LOCK_STALE_MS = 5_000;
const STAGE_LOCK_TRIES = { retries: 7, factor: 1, minTimeout: 1_000, maxTimeout: 1_000 };

/**
 * The stage's working folder held for this run (`<work>.lock` beside it): a second run of the job, or of its input
 * and template to another output in the same folder, waits a few seconds for the first to end and is then refused,
 * rather than computing every row again beside it and failing at its join. Released by the function it returns;
 * `onLost` hears of a lock another run took over (this one stalled past the stale time).
 */
export async function holdStage(place: StagePlace, onLost: (err: Error) => void): Promise<() => Promise<void>> {
  const { lock } = await import("proper-lockfile");
  await mkdir(path.dirname(place.work), { recursive: true });
  try {
    return await lock(place.work, {
      realpath: false,
      retries: STAGE_LOCK_TRIES,
      stale: STAGE_LOCK_STALE_MS,
      update: 1_000,
      onCompromised: onLost,
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ELOCKED") throw err;
    throw new DatasetError(`${place.work}: another run of this job is under way (it holds ${place.work}.lock): wait for it to end`);
  }
}

/** Where a job's working folder and record lie: named after the input and the job's key, beside the output. */
export function stagePlace(job: Job): StagePlace {
  const stem =
    path
      .basename(job.input)
      .replace(/\.[^.]*$/, "")
      .replace(/[^A-Za-z0-9._-]+/g, "_") || "input";
  const name = `${stem}.${jobKey(job)}`;
  const dir = path.dirname(job.output);
  return { work: path.join(dir, `${name}.work`), record: path.join(dir, `.${name}.json`) };
}

/** The record, or none (no file yet, or one this runner cannot read: the stage then starts as new). */
export const readState = (file: string): Promise<StageState | undefined> =>
  readJsonFile(file).then(
    (v) => v as StageState | undefined,
    () => undefined,
  );
export const saveState = (file: string, state: StageState): Promise<void> => writeJsonAtomic(file, state);

/** The output as the record has it, if the file is still what the job wrote; `current` if it holds the latest answers. */
export async function writtenOutput(
  state: StageState | undefined,
  output: string,
): Promise<(WrittenOutput & { current: boolean }) | undefined> {
  const written = state?.outputs?.[output];
  const s = await stat(output).catch(() => null);
  if (!written || !s || s.size !== written.size || s.mtimeMs !== written.mtimeMs) return undefined;
  return { ...written, current: written.version === (state?.version ?? 0) };
}

/** Formats whose types hold every result column as it is: an earlier output in one of them is joined from first. */
const EXACT_FIRST = [".parquet", ".jsonl", ".ndjson", ".tsv", ".csv"];

/** An earlier output of this job, unchanged and with the same postprocess columns, to join another format from. */
export async function earlierOutput(
  state: StageState | undefined,
  postprocess: string | null,
): Promise<{ file: string; written: WrittenOutput } | undefined> {
  const files = Object.keys(state?.outputs ?? {}).sort(
    (a, b) => EXACT_FIRST.indexOf(path.extname(a).toLowerCase()) - EXACT_FIRST.indexOf(path.extname(b).toLowerCase()),
  );
  for (const file of files) {
    const written = await writtenOutput(state, file);
    if (written?.current && written.postprocess === postprocess) return { file, written };
  }
  return undefined;
}

/** The postprocess module's content hash (its columns come from it), or null without one. */
export async function postprocessHash(job: Job): Promise<string | null> {
  if (!job.postprocess) return null;
  return createHash("sha256")
    .update(await readFile(job.postprocess))
    .digest("hex")
    .slice(0, 12);
}

/** Whether the working folder holds any answer (a run to resume or join). */
export async function hasResults(work: string): Promise<boolean> {
  for (const f of ["output.jsonl", "errors.jsonl"]) if (((await stat(path.join(work, f)).catch(() => null))?.size ?? 0) > 0) return true;
  return false;
}

/**
 * After a stage, whatever its end: a working folder that holds no answer goes (a job refused before it ran leaves
 * nothing behind), and so does a record that names neither an output nor a server's batch.
 */
export async function tidy(place: StagePlace): Promise<void> {
  if (!(await hasResults(place.work))) await rm(place.work, { recursive: true, force: true });
  const state = await readState(place.record);
  if (state && !state.remoteBatch && Object.keys(state.outputs ?? {}).length === 0 && !(await hasResults(place.work)))
    await rm(place.record, { force: true });
}
