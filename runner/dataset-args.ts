// The runner's flags for a dataset job: --job and every field of a job file, named as in the file. Any of them
// makes the run a dataset job; -i and -o then name its tables.
import path from "node:path";
import type { JobFields } from "../datasets/job.js";

export const DATASET_OPTIONS = {
  job: { type: "string" },
  where: { type: "string" },
  limit: { type: "string" },
  endpoint: { type: "string" },
  "job-model": { type: "string" },
  messages: { type: "string" },
  prompt: { type: "string" },
  body: { type: "string" },
  params: { type: "string" },
  "params-from": { type: "string" },
  "response-format": { type: "string" },
  keep: { type: "string" },
  preprocess: { type: "string" },
  postprocess: { type: "string" },
  "dry-run": { type: "boolean" },
  "keep-work": { type: "boolean" },
  "result-prefix": { type: "string" },
  "result-names": { type: "string" },
  remote: { type: "string" },
  "api-key": { type: "string" },
} as const;

export const DATASET_USAGE = `
Dataset jobs (docs/datasets.md): a table in, the same table with the answers out.
      --job <job.yaml>          the job file; the flags below set or override its fields
  -i, -o                        the input table (.parquet, .csv, .tsv, .jsonl, .ndjson; a folder or glob of
                                parts) and the output table (.parquet, .csv, .tsv, .jsonl)
      --where <sql>             a row filter      --limit <n>       the first n rows (after --where)
      --endpoint <url>          /v1/chat/completions (default), /v1/completions, /v1/embeddings, ...
      --job-model <name>        the model the requests name (--model stays the GGUF file)
      --messages <json>  --prompt <text>  --body <json>   the request template, with {{column}} placeholders
      --params <json>  --params-from <json>  --response-format <json>  --keep <a,b,...>
      --preprocess <module.ts>  --postprocess <module.ts>   (row) => body, (row, response) => columns
      --result-prefix <text>    before each result column's name (default: none, or result_ where a kept
                                input column has a result column's name)
      --result-names <json>     a result column's own name, e.g. {"text":"answer"}
      --dry-run                 print the first three requests and the output's columns; run nothing
      --keep-work               keep the working folder once the output is whole (it holds every answer)
      --remote <url>            run on a server with OpenAI's Files and Batches API instead of here
      --api-key <key>           its key (default: $OPENAI_API_KEY)`;

type Values = Partial<Record<keyof typeof DATASET_OPTIONS | "input-file" | "output-file" | "retry-failed", string | boolean>>;

const TEMPLATE_FLAGS = ["job", "messages", "prompt", "body", "preprocess"] as const;

export const isDatasetMode = (values: Values): boolean => TEMPLATE_FLAGS.some((f) => values[f] !== undefined);

export interface DatasetArgs<E = object> {
  /** The job file, absolute. */
  jobFile?: string;
  /** Fields from flags, paths as typed (resolved against `cwd`). */
  flags: Partial<JobFields>;
  cwd: string;
  dryRun: boolean;
  /** Keep the working folder once the output is whole. */
  keepWork: boolean;
  /** Run again the rows whose answer is an error (the runner's --retry-failed), then join the table anew. */
  retryFailed: boolean;
  remote?: { url: string; apiKey?: string };
  engine: E;
}

export function datasetArgs<E>(
  values: Values,
  baseDir: string,
  engine: E,
): { kind: "dataset"; args: DatasetArgs<E> } | { kind: "usage"; message: string } {
  const flags: Record<string, unknown> = {};
  const text = (flag: keyof Values, field: string) => {
    if (typeof values[flag] === "string") flags[field] = values[flag];
  };
  text("input-file", "input");
  text("output-file", "output");
  text("where", "where");
  text("endpoint", "endpoint");
  text("job-model", "model");
  text("prompt", "prompt");
  text("preprocess", "preprocess");
  text("postprocess", "postprocess");
  text("result-prefix", "result_prefix");
  if (typeof values.keep === "string") flags.keep = listOf(values.keep);
  if (typeof values.limit === "string") {
    const n = Number(values.limit);
    if (!Number.isInteger(n) || n < 1) return { kind: "usage", message: `--limit must be an integer >= 1, got '${values.limit}'` };
    flags.limit = n;
  }
  const json: Array<[keyof Values, string]> = [
    ["messages", "messages"],
    ["body", "body"],
    ["params", "params"],
    ["params-from", "params_from"],
    ["response-format", "response_format"],
    ["result-names", "result_names"],
  ];
  for (const [flag, field] of json) {
    const raw = values[flag];
    if (typeof raw !== "string") continue;
    try {
      flags[field] = JSON.parse(raw);
    } catch (err) {
      return { kind: "usage", message: `--${flag} must be JSON: ${(err as Error).message}` };
    }
  }
  const retryFailed = values["retry-failed"] === true;
  const args: DatasetArgs<E> = {
    flags: flags as Partial<JobFields>,
    cwd: baseDir,
    dryRun: values["dry-run"] === true,
    keepWork: values["keep-work"] === true,
    retryFailed,
    engine,
  };
  if (typeof values.job === "string") args.jobFile = path.resolve(baseDir, values.job);
  if (typeof values.remote === "string") {
    if (!/^https?:\/\//i.test(values.remote)) return { kind: "usage", message: `--remote must be an http(s) URL, got '${values.remote}'` };
    const apiKey = typeof values["api-key"] === "string" ? values["api-key"] : process.env.OPENAI_API_KEY;
    args.remote = { url: values.remote.replace(/\/+$/, ""), ...(apiKey ? { apiKey } : {}) };
    if (retryFailed)
      return { kind: "usage", message: "--retry-failed runs here: on a server, retry the batch (POST /v1/batches/{id}/retry)" };
  } else if (values["api-key"] !== undefined) return { kind: "usage", message: "--api-key goes with --remote" };
  return { kind: "dataset", args };
}

/** A list flag: names separated by commas, or a JSON array as the job file would hold it (checked as the file's field is). */
function listOf(text: string): unknown {
  if (text.trim().startsWith("[")) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      // Not JSON after all: a name that begins with a bracket.
    }
  }
  return text.split(",").map((s) => s.trim());
}
