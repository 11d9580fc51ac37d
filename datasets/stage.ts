// The two steps around a dataset job's batch that the runner and the service share: before it, the columns the
// output keeps, checked against the input and the job's own; after it, the answers joined back into the table.

import { mkdir } from "node:fs/promises";
import path from "node:path";
import type { Job } from "./job.js";
import { checkColumns, type Postprocess } from "./requests.js";
import { type ResultsPass, resultColumns, writeResults } from "./results.js";
import { type Column, DatasetError, type TableInput, type Tables } from "./tables.js";

/**
 * The input columns the output carries (`keep`, else all), once every column the job reads is in the input and none
 * kept is also a result column. `keepField` names the field in the message, as the caller's user sets it.
 */
export function keptColumns(job: Job, columns: readonly Column[], label: string, keepField = "keep"): string[] {
  checkColumns(job, columns, label);
  const keep = job.keep ?? columns.map((c) => c.name);
  const clash = resultColumns(job).find((c) => keep.includes(c.name));
  if (clash)
    throw new DatasetError(
      `${label}: column '${clash.name}' is also a result column: leave it out with ${keepField}, or rename it in the input`,
    );
  return keep;
}

/** Writes `job.output`: the kept columns beside the answers, every row in input order (`results.jsonl` in `work`). */
export async function joinAnswers(
  job: Job,
  tables: Tables,
  input: TableInput,
  s: {
    keep: readonly string[];
    rows: number;
    hash: string;
    output: string;
    errors: string;
    earlier?: Array<{ output: string; errors: string }>;
    work: string;
    postprocess?: Postprocess;
  },
): Promise<ResultsPass> {
  const results = path.join(s.work, "results.jsonl");
  const pass = await writeResults(job, { ...s, target: results, input });
  await mkdir(path.dirname(job.output), { recursive: true });
  const written = await tables.write(input, { keep: s.keep, results, columns: pass.columns, output: job.output });
  if (written !== s.rows) throw new DatasetError(`${job.output}: wrote ${written} rows of ${s.rows}`);
  return pass;
}
