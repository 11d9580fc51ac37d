// Command-line flags of the offline runner, in the style of `vllm run_batch`.
import path from "node:path";
import { parseArgs } from "node:util";
import { parseModelRef } from "../config/model-ref.js";
import { DATASET_OPTIONS, DATASET_USAGE, type DatasetArgs, datasetArgs, isDatasetMode } from "./dataset-args.js";

export interface RunnerArgs {
  /** Local path or http(s) URL. */
  input: string;
  /** Local path or http(s) URL. */
  output: string;
  /** Local path or http(s) URL for the failed requests' lines. */
  errors: string;
  /** A GGUF file (absolute) or a download's reference (hf:..., https://...); undefined: MODEL_PATH, then the generated model. */
  model?: string;
  /** A models file (MODELS_FILE): the batch's `model` picks the model, local or upstream. */
  modelsFile?: string;
  concurrency?: number;
  threads?: number;
  sequences?: number;
  contexts?: number;
  contextSize?: number;
  /** Start afresh instead of continuing the results already in a local output (and error) file. */
  overwrite?: boolean;
  /** Run again the requests of the error file (moved aside first); those in the output are never rerun. */
  retryFailed?: boolean;
  /** Whose hourly price the run's time is costed at, when the models file prices pool hours (default dedicated). */
  pool?: "spot" | "dedicated";
  /** Every request computes: the result cache (BATCH_DIR/cache/) is neither read nor filled, as RESULT_CACHE=off. */
  noCache?: boolean;
}

export type ParsedArgs =
  | { kind: "run"; args: RunnerArgs }
  | { kind: "dataset"; args: DatasetArgs<EngineArgs> }
  | { kind: "plan"; args: { input: string; engine: EngineArgs } }
  | { kind: "help" }
  | { kind: "usage"; message: string };

export const USAGE = `Usage: npm run batch -- -i <input> -o <output> [options]

Runs an OpenAI batch file (one request per line) through the engine, with no server.
<input> and <output> are local paths or http(s) URLs (GET in, PUT out, with retries).

Options:
  -i, --input-file <path|url>   the batch file (OpenAI batch JSONL: custom_id, method, url, body)
  -o, --output-file <path|url>  where the results go, one OpenAI batch output line per request
      --error-file <path|url>   where failed requests' lines go (default: the output's name with
                                .errors.jsonl for .jsonl: out.jsonl -> out.errors.jsonl)
      --model <model>           the GGUF model: a file, hf:<owner>/<repo>[:<quant>] or an https:// URL
                                of a .gguf, downloaded once into MODELS_DIR (default: $MODEL_PATH,
                                else the generated test model)
      --models-file <path.yaml> a models file (as MODELS_FILE): the lines' "model" picks a local or
                                upstream model from it (examples/models.yaml)
      --concurrency <n>         requests in flight at once (default: twice the engine's sequences,
                                four times that with the result cache on, twice the sequences computing)
      --threads <n>             CPU threads for llama.cpp, per context (default: chosen from the machine)
      --sequences <n>           parallel sequences, over all contexts (default: chosen from the model)
      --contexts <n>            generation contexts decoding at once (default on CPU: one per core with
                                the patched engine, two per core with the prebuilt one, at most 4;
                                one on a GPU)
      --context-size <n>        tokens per sequence, at least 64 (default: CONTEXT_SIZE)
      --overwrite               start afresh; without it, a run continues the results already in
                                a local output and error file (requests there, by custom_id, are skipped)
      --retry-failed            run again the requests in the error file (moved aside to
                                <errors>.retried); requests in the output are never rerun
      --plan <path|url>         print what the batch file would ask (distinct requests, prompt tokens by
                                the model's tokenizer, generation bounds, time, cost) and run nothing
      --pool <spot|dedicated>   the pool whose hourly price (a models file's price) the run is
                                costed at in the summary (default: dedicated, a machine of your own)
      --no-cache                compute every request: the result cache in BATCH_DIR/cache/ is
                                neither read nor filled (as RESULT_CACHE=off)
  -h, --help                    this text
${DATASET_USAGE}

Every line is validated first, exactly as POST /v1/batches does; an invalid file runs nothing
and exits 2 with the line numbers of its problems. Other settings come from the same
environment variables and config/model_config.yaml as the server (GPU, PIPELINE_BATCH_SIZE, ...);
LOG_LEVEL=warn hides the engine's start-up notes, LOG_FORMAT=json prints them as pino JSON.
Exit status: 0 when every line ran (failed requests are in the error file) or none was left to
run; 2 for input the runner cannot take, found before anything runs: bad flags or settings, a
missing or invalid input file, a model the models file does not serve, an output of another
file, a dataset job or dataset it refuses; 1 for an I/O failure or a fault while it runs (a
model that cannot load, a dataset read over its memory or time bound, what a --remote server
refuses or fails); 130 when interrupted.`;

/** `x.jsonl` -> `x.errors.jsonl`; a URL keeps its query string (its path gets the suffix). */
export function defaultErrorFile(output: string): string {
  if (/^https?:\/\//i.test(output)) {
    const url = new URL(output);
    url.pathname = withErrorsSuffix(url.pathname);
    return url.toString();
  }
  return withErrorsSuffix(output);
}

function withErrorsSuffix(p: string): string {
  return /\.jsonl$/i.test(p) ? p.replace(/\.jsonl$/i, ".errors.jsonl") : `${p}.errors.jsonl`;
}

/**
 * Local paths come back absolute, resolved against `baseDir`: `npm run` starts scripts in the package
 * root, so the caller passes npm's INIT_CWD (where the user typed the command) to keep them the user's.
 */
export function parseRunnerArgs(argv: string[], baseDir = process.cwd()): ParsedArgs {
  let values: ReturnType<typeof parseOptions>["values"];
  try {
    ({ values } = parseOptions(argv));
  } catch (err) {
    return { kind: "usage", message: (err as Error).message };
  }
  if (values.help) return { kind: "help" };
  const engine = engineArgs(values, baseDir);
  if ("message" in engine) return { kind: "usage", message: engine.message };
  if (values.plan !== undefined) return planArgs(values, baseDir, engine);
  if (isDatasetMode(values)) {
    if (values["error-file"])
      return { kind: "usage", message: "--error-file is for batch files: a dataset job keeps failed rows in its output" };
    if (values["retry-failed"] && values.overwrite) return { kind: "usage", message: "--retry-failed and --overwrite exclude each other" };
    return datasetArgs(values, baseDir, engine);
  }
  const input = values["input-file"];
  const output = values["output-file"];
  if (!input) return { kind: "usage", message: "missing -i/--input-file" };
  if (!output) return { kind: "usage", message: "missing -o/--output-file" };
  const local = (p: string) => (/^https?:\/\//i.test(p) ? p : path.resolve(baseDir, p));
  const args: RunnerArgs = {
    input: local(input),
    output: local(output),
    errors: local(values["error-file"] ?? defaultErrorFile(output)),
    ...engine,
  };
  if (values["retry-failed"]) {
    if (args.overwrite) return { kind: "usage", message: "--retry-failed and --overwrite exclude each other" };
    if (/^https?:\/\//i.test(args.output) || /^https?:\/\//i.test(args.errors))
      return { kind: "usage", message: "--retry-failed needs a local output and error file" };
    args.retryFailed = true;
  }
  if (new Set([args.input, args.output, args.errors]).size < 3) {
    return { kind: "usage", message: "the input, output and error files must be three different places" };
  }
  return { kind: "run", args };
}

/** --plan <file>: the file itself is the input, and nothing is written, so the flags of a run's files are refused. */
function planArgs(values: ReturnType<typeof parseOptions>["values"], baseDir: string, engine: EngineArgs): ParsedArgs {
  const plan = values.plan as string;
  if (isDatasetMode(values)) return { kind: "usage", message: "--plan is for batch files: a dataset job is planned by --dry-run" };
  for (const flag of ["input-file", "output-file", "error-file", "retry-failed", "overwrite"] as const)
    if (values[flag] !== undefined)
      return { kind: "usage", message: `--plan <file> runs and writes nothing: --${flag} does not go with it` };
  return { kind: "plan", args: { input: /^https?:\/\//i.test(plan) ? plan : path.resolve(baseDir, plan), engine } };
}

/** The flags a batch file and a dataset job share: the model, the engine's shape, --overwrite and --pool. */
export type EngineArgs = Omit<RunnerArgs, "input" | "output" | "errors" | "retryFailed">;

function engineArgs(values: ReturnType<typeof parseOptions>["values"], baseDir: string): EngineArgs | { message: string } {
  const ints: Array<[keyof EngineArgs, string, number]> = [
    ["concurrency", "concurrency", 1],
    ["threads", "threads", 1],
    ["sequences", "sequences", 1],
    ["contexts", "contexts", 1],
    ["contextSize", "context-size", 64],
  ];
  const args: EngineArgs = {};
  if (values.model) {
    try {
      // A download's reference is kept as written (and fetched into MODELS_DIR); a file is the user's, from their folder.
      args.model = parseModelRef(values.model).kind === "file" ? path.resolve(baseDir, values.model) : values.model.trim();
    } catch (err) {
      return { message: `--model ${values.model}: ${(err as Error).message}` };
    }
  }
  if (values["models-file"]) args.modelsFile = path.resolve(baseDir, values["models-file"]);
  if (args.model && args.modelsFile) return { message: "--model and --models-file exclude each other: name the GGUF in the models file" };
  if (values.overwrite) args.overwrite = true;
  if (values["no-cache"]) args.noCache = true;
  const pool = values.pool;
  if (pool !== undefined) {
    if (pool !== "spot" && pool !== "dedicated") return { message: `--pool must be spot or dedicated, got '${pool}'` };
    args.pool = pool;
  }
  for (const [key, flag, min] of ints) {
    const raw = values[flag as keyof typeof values];
    if (raw === undefined) continue;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) return { message: `--${flag} must be an integer >= ${min}, got '${raw}'` };
    (args as unknown as Record<string, number>)[key] = n;
  }
  return args;
}

const parseOptions = (argv: string[]) =>
  parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      "input-file": { type: "string", short: "i" },
      "output-file": { type: "string", short: "o" },
      "error-file": { type: "string" },
      model: { type: "string" },
      "models-file": { type: "string" },
      concurrency: { type: "string" },
      threads: { type: "string" },
      sequences: { type: "string" },
      contexts: { type: "string" },
      "context-size": { type: "string" },
      overwrite: { type: "boolean" },
      "no-cache": { type: "boolean" },
      "retry-failed": { type: "boolean" },
      pool: { type: "string" },
      plan: { type: "string" },
      help: { type: "boolean", short: "h" },
      ...DATASET_OPTIONS,
    },
  });
