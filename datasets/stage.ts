// The two steps around a dataset job's batch that the runner and the service share: before it, the columns the
// output keeps, checked against the input and the job's own; after it, the answers joined back into the table.

import { mkdir } from "node:fs/promises";
import path from "node:path";
import type { Job } from "./job.js";
import { checkColumns, type Postprocess } from "./requests.js";
import { type ResultColumn, type ResultsPass, resultColumns, writeResults } from "./results.js";
import { type Column, DatasetError, type TableInput, type Tables, type WriteSpec } from "./tables.js";

/** A result column and its name in the output. */
export interface NamedColumn extends ResultColumn {
  as: string;
}

/** The output's columns: the input's kept, then the job's results under their names in the output. */
export interface OutputColumns {
  keep: string[];
  results: NamedColumn[];
  /** Why the result columns were prefixed though the job asked for no prefix, to say to the user. */
  note?: string;
}

/** Prefixes tried in turn for the result columns when the job sets none: the first that clashes with no kept column. */
const DEFAULT_PREFIXES = ["", "result_", ...Array.from({ length: 98 }, (_, i) => `result${i + 2}_`)];

/**
 * The input columns the output carries (`keep`, else all) under their own names, once every column the job reads is
 * in the input, and the result columns under names that cannot clash with them: their own, or, when a kept column has
 * one of them, each with the first free prefix of `result_`, `result2_`, ... A clash the job's own `result_prefix` or
 * `result_names` makes is refused. `field` names a job field in messages as the caller's user sets it.
 */
export function outputColumns(job: Job, columns: readonly Column[], label: string, field = (f: string) => f): OutputColumns {
  checkColumns(job, columns, label);
  const keep = job.keep ?? columns.map((c) => c.name);
  const base = resultColumns(job);
  for (const key of Object.keys(job.resultNames)) {
    if (!base.some((c) => c.name === key))
      throw new DatasetError(
        `${label}: ${field(`result_names.${key}`)}: not a result column of this job (${base.map((c) => c.name).join(", ")})`,
      );
  }
  const named = (prefix: string) => base.map((c) => ({ ...c, as: job.resultNames[c.name] ?? `${prefix}${c.name}` }));
  const clashOf = (results: NamedColumn[]) => results.find((c, i) => keep.includes(c.as) || results.findIndex((d) => d.as === c.as) !== i);
  if (job.resultPrefix !== undefined) {
    const results = named(job.resultPrefix);
    refuseClash(clashOf(results), results, keep, label, field, job);
    return { keep, results };
  }
  const prefix = DEFAULT_PREFIXES.find((p) => clashOf(named(p)) === undefined);
  const results = named(prefix ?? "");
  if (prefix === undefined) refuseClash(clashOf(results), results, keep, label, field, job);
  const kept = base.find((c) => keep.includes(c.name))?.name;
  const note = prefix
    ? `the input's '${kept}' is kept under its own name, so the answers' columns are named ${prefix}${base[0].name}, ${prefix}${base[1].name}, ... (set result_prefix or result_names to choose)`
    : undefined;
  return { keep, results, ...(note ? { note } : {}) };
}

/** A clash the job's own names made, refused naming the field that made it. */
function refuseClash(
  clash: NamedColumn | undefined,
  results: NamedColumn[],
  keep: readonly string[],
  label: string,
  field: (f: string) => string,
  job: Job,
): void {
  if (!clash) return;
  const mapped = job.resultNames[clash.name] !== undefined;
  const by = field(mapped ? `result_names.${clash.name}` : "result_prefix");
  if (keep.includes(clash.as)) {
    const fix = mapped ? "choose another name" : "choose another prefix";
    const what = mapped
      ? `'${clash.as}' is an input column the output keeps`
      : `'${job.resultPrefix ?? ""}' names a result column '${clash.as}', as the input column the output keeps`;
    throw new DatasetError(`${label}: ${by}: ${what}: ${fix}, or leave '${clash.as}' out with ${field("keep")}`);
  }
  const other = results.find((c) => c.as === clash.as && c !== clash)!;
  throw new DatasetError(`${label}: ${by}: '${clash.as}' is also the name of ${other.name}'s column`);
}

/** Writes `job.output`: the kept columns beside the answers, every row in input order (`results.jsonl` in `work`). */
export async function joinAnswers(
  job: Job,
  tables: Tables,
  input: TableInput,
  s: {
    columns: OutputColumns;
    rows: number;
    hash: string;
    output: string;
    errors: string;
    earlier?: Array<{ output: string; errors: string }>;
    work: string;
    postprocess?: Postprocess;
  },
): Promise<ResultsPass & { named: NamedColumn[] }> {
  const results = path.join(s.work, "results.jsonl");
  const pass = await writeResults(job, { ...s, target: results, input });
  return { ...pass, named: await joinResults(job, tables, input, { columns: s.columns, rows: s.rows, results, of: pass.columns }) };
}

/**
 * Writes `job.output` from a file of result columns (`results`: one JSON object per row, in input order, holding
 * the columns `of`): the kept columns beside them, named as the output names them.
 */
export async function joinResults(
  job: Job,
  tables: Tables,
  input: TableInput,
  s: { columns: OutputColumns; rows: number; results: string; of: readonly ResultColumn[] },
): Promise<NamedColumn[]> {
  const { keep } = s.columns;
  const named = s.of.map((c) => s.columns.results.find((r) => r.name === c.name) ?? { ...c, as: c.name });
  refusePostprocessClash(job, keep, named);
  await writeAll(job, tables, input, s.rows, { keep, results: s.results, columns: named, output: job.output });
  return named;
}

/** The output written, every row of it, into a folder made for it if need be. */
async function writeAll(job: Job, tables: Tables, input: TableInput, rows: number, spec: WriteSpec): Promise<void> {
  await mkdir(path.dirname(job.output), { recursive: true });
  const written = await tables.write(input, spec);
  if (written !== rows) throw new DatasetError(`${job.output}: wrote ${written} rows of ${rows}`);
}

/**
 * Writes `job.output` from an output this job wrote earlier in another format (or with other kept columns): the
 * input's kept columns beside the earlier output's result columns (`earlier`, named as it holds them), renamed as
 * this output names them. Nothing runs again.
 */
export async function joinEarlier(
  job: Job,
  tables: Tables,
  input: TableInput,
  s: { columns: OutputColumns; rows: number; from: string; earlier: readonly NamedColumn[] },
): Promise<NamedColumn[]> {
  const named = s.earlier.map((c) => ({ ...c, as: s.columns.results.find((r) => r.name === c.name)?.as ?? c.name }));
  refusePostprocessClash(job, s.columns.keep, named);
  const columns = s.earlier.map((c, i) => ({ name: c.as, type: c.type, as: named[i].as }));
  await writeAll(job, tables, input, s.rows, { keep: s.columns.keep, results: s.from, resultsTable: true, columns, output: job.output });
  return named;
}

/** A postprocess module's columns keep the names it gives them: one that clashes with another column is the user's to rename. */
function refusePostprocessClash(job: Job, keep: readonly string[], named: readonly NamedColumn[]): void {
  const clash = named.find((c, i) => keep.includes(c.as) || named.findIndex((d) => d.as === c.as) !== i);
  if (clash)
    throw new DatasetError(
      `${job.output}: postprocess returned '${clash.as}', which the output already has (${keep.includes(clash.as) ? "an input column it keeps" : "a result column"}): return another name, or leave it out with keep`,
    );
}
