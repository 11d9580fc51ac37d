// A dataset job as its file (YAML or JSON) and the runner's flags give it: the fields, their checks, and the
// stages of a multi-stage file. Paths are resolved against the job file's folder, as a user reading it expects.
import { readFile } from "node:fs/promises";
import path from "node:path";
import YAML from "yaml";
import { z } from "zod";
import { nearestKey, strictObject } from "../config/known-keys.js";
import { ENDPOINTS, type Endpoint } from "../openai/backend.js";
import { bodySchemaFor } from "../parse/request.js";
import { OUTPUT_FORMATS } from "./tables.js";

/** A job that cannot run as written: one line, naming the field. */
export class JobError extends Error {
  constructor(
    message: string,
    /** The field at fault (`limit`, `params.n`), where one is. */
    readonly field?: string,
  ) {
    super(message);
    this.name = "JobError";
  }
}

const Message = strictObject({ role: z.enum(["system", "developer", "user", "assistant"]), content: z.string() }, "field");

/** The fields one stage may set; a multi-stage file's top level sets them for every stage. */
const JobFields = {
  input: z.string().min(1).optional(),
  where: z.string().min(1).optional(),
  limit: z.number().int().min(1).optional(),
  endpoint: z.enum(ENDPOINTS, { error: `must be one of ${ENDPOINTS.join(", ")}` }).optional(),
  model: z.string().min(1).optional(),
  messages: z.array(Message).min(1).optional(),
  prompt: z.string().optional(),
  body: z.record(z.string(), z.unknown()).optional(),
  preprocess: z.string().min(1).optional(),
  postprocess: z.string().min(1).optional(),
  params: z.record(z.string(), z.unknown()).optional(),
  params_from: z.record(z.string(), z.string().min(1)).optional(),
  response_format: z.record(z.string(), z.unknown()).optional(),
  output: z.string().min(1).optional(),
  keep: z.array(z.string().min(1)).optional(),
  result_prefix: z.string().optional(),
  result_names: z.record(z.string(), z.string().min(1)).optional(),
};
const StageSchema = strictObject(JobFields, "field");
const FileSchema = strictObject({ ...JobFields, stages: z.array(StageSchema).min(1).optional() }, "field");

export type JobFields = z.infer<typeof StageSchema>;

/** One stage, checked and with absolute paths. */
export interface Job {
  input: string;
  output: string;
  endpoint: Endpoint;
  where?: string;
  limit?: number;
  model?: string;
  messages?: Array<{ role: string; content: string }>;
  prompt?: string;
  body?: Record<string, unknown>;
  preprocess?: string;
  postprocess?: string;
  params: Record<string, unknown>;
  paramsFrom: Record<string, string>;
  responseFormat?: Record<string, unknown>;
  keep?: string[];
  /** Before each result column's name; unset: none, unless a kept input column has a result column's name. */
  resultPrefix?: string;
  /** A result column's own name in the output, over the prefix. */
  resultNames: Record<string, string>;
}

/** Parameters whose answer the table has no column for: only a postprocess module can keep what they ask for. */
export const NOT_IN_TABLE = ["logprobs", "top_logprobs"];
const NO_LOGPROBS = "the table has no column for log probabilities: leave it out, or keep them with a postprocess module (the runner)";

/** The parameters a request to `endpoint` may hold, as its schema names them. */
/** Why a body may not ask for `key` (a rendered body's own, from a body template or a preprocess module). */
export function notInTable(job: { postprocess?: string }, key: string): string | undefined {
  return NOT_IN_TABLE.includes(key) && !job.postprocess ? NO_LOGPROBS : undefined;
}

export function parametersOf(endpoint: Endpoint): string[] {
  const schema = bodySchemaFor(endpoint) as unknown as { shape?: Record<string, unknown> };
  return Object.keys(schema.shape ?? {});
}

/** Fields the template sets, which `params` may not set again. */
const TEMPLATE_FIELDS = ["model", "messages", "prompt", "input", "system", "response_format", "text"];

export async function readJobFile(file: string): Promise<{ fields: z.infer<typeof FileSchema>; dir: string }> {
  const text = await readFile(file, "utf8").catch((err: NodeJS.ErrnoException) => {
    throw new JobError(`${file}: ${err.code === "ENOENT" ? "no such job file" : err.message}`);
  });
  let raw: unknown;
  try {
    raw = YAML.parse(text);
  } catch (err) {
    throw new JobError(`${file}: not YAML or JSON: ${(err as Error).message.split("\n")[0]}`);
  }
  return { fields: check(FileSchema, raw ?? {}, file), dir: path.dirname(path.resolve(file)) };
}

/** The runner's flag for each field whose flag is not `--<field>` with dashes. */
const FLAG_OF: Record<string, string> = { input: "-i", output: "-o", model: "--job-model" };

/** The runner's flags (JSON text already parsed), checked as a job file's fields are; an error names the flag. */
export function checkFlags(flags: Record<string, unknown>): JobFields {
  return check(StageSchema, flags, (field) => FLAG_OF[field.split(".")[0]] ?? `--${field.split(".")[0].replaceAll("_", "-")}`);
}

/** A job's fields from elsewhere (an HTTP request's `job`), checked as a job file's are; an error names `where.field`. */
export function checkFields(fields: Record<string, unknown>, where: string): JobFields {
  return check(StageSchema, fields, (field) => `${where}: ${field}`, where);
}

function check<T>(schema: z.ZodType<T>, raw: unknown, where: string | ((field: string) => string), whole = "job"): T {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue.path.join(".") || "job";
  const named = typeof where === "string" ? `${where}: ${field}` : issue.path.length ? where(field) : whole;
  throw new JobError(`${named}: ${issue.message}`, issue.path.length ? field : undefined);
}

/**
 * The stages to run, in order: the file's stages (each taking the file's top-level fields as defaults, and the
 * stage before's output as its input where it names none) or the file itself, with `flags` over every stage.
 */
export function planStages(file: z.infer<typeof FileSchema> | undefined, dir: string, flags: JobFields, cwd: string): Job[] {
  const { stages, ...top } = file ?? {};
  const at = (base: string, p: string | undefined) => (p === undefined ? undefined : path.resolve(base, p));
  const fromFile = (f: JobFields): JobFields => ({
    ...f,
    input: at(dir, f.input),
    output: at(dir, f.output),
    preprocess: at(dir, f.preprocess),
    postprocess: at(dir, f.postprocess),
  });
  const fromFlags: JobFields = {
    ...flags,
    input: at(cwd, flags.input),
    output: at(cwd, flags.output),
    preprocess: at(cwd, flags.preprocess),
    postprocess: at(cwd, flags.postprocess),
  };
  const defined = (f: JobFields) => Object.fromEntries(Object.entries(f).filter(([, v]) => v !== undefined)) as JobFields;
  const list = stages ?? [{}];
  if (stages && (flags.input || flags.output) && stages.length > 1)
    throw new JobError("--input-file and --output-file name one stage's files: set them in the job's stages");
  let previous: string | undefined;
  return list.map((stage, i) => {
    const merged = { ...defined(fromFile(top)), ...defined(fromFile(stage)), ...defined(fromFlags) };
    if (merged.input === undefined && previous !== undefined) merged.input = previous;
    const job = finish(merged, stages ? `stage ${i + 1}` : "job");
    previous = job.output;
    return job;
  });
}

function finish(f: JobFields, name: string): Job {
  const endpoint = f.endpoint ?? "/v1/chat/completions";
  checkShape(f, endpoint, (field, message) => new JobError(`${name}: ${field === undefined ? "" : `${field}: `}${message}`, field));
  return {
    input: f.input as string,
    output: f.output as string,
    endpoint,
    ...(f.where !== undefined ? { where: f.where } : {}),
    ...(f.limit !== undefined ? { limit: f.limit } : {}),
    ...(f.model !== undefined ? { model: f.model } : {}),
    ...(f.messages ? { messages: f.messages } : {}),
    ...(f.prompt !== undefined ? { prompt: f.prompt } : {}),
    ...(f.body ? { body: f.body } : {}),
    ...(f.preprocess ? { preprocess: f.preprocess } : {}),
    ...(f.postprocess ? { postprocess: f.postprocess } : {}),
    params: f.params ?? {},
    paramsFrom: f.params_from ?? {},
    ...(f.response_format ? { responseFormat: f.response_format } : {}),
    ...(f.keep ? { keep: f.keep } : {}),
    ...(f.result_prefix !== undefined ? { resultPrefix: f.result_prefix } : {}),
    resultNames: f.result_names ?? {},
  };
}

/** Each of `params` and `params_from` is a parameter the endpoint takes (a misspelt one named with the nearest) and the table keeps. */
function checkParams(f: JobFields, endpoint: Endpoint, bad: (field: string | undefined, message: string) => JobError): void {
  const known = parametersOf(endpoint);
  const given: Array<[string, string]> = [
    ...Object.keys(f.params ?? {}).map((k): [string, string] => ["params", k]),
    ...Object.keys(f.params_from ?? {}).map((k): [string, string] => ["params_from", k]),
  ];
  for (const [field, key] of given) {
    if (field === "params" && TEMPLATE_FIELDS.includes(key)) throw bad(`params.${key}`, "set by the job itself (use its own field)");
    if (known.length > 0 && !known.includes(key)) {
      const near = nearestKey(key, known);
      throw bad(`${field}.${key}`, `${endpoint} takes no parameter '${key}'${near ? ` (did you mean '${near}'?)` : ""}`);
    }
    if (NOT_IN_TABLE.includes(key) && !f.postprocess) throw bad(`${field}.${key}`, NO_LOGPROBS);
  }
}

/** The checks a job's fields pass together: its files, one template, and what its endpoint takes. */
function checkShape(f: JobFields, endpoint: Endpoint, bad: (field: string | undefined, message: string) => JobError): void {
  if (!f.input) throw bad("input", "required (a .parquet, .csv, .tsv, .jsonl or .ndjson file, a folder or a glob)");
  if (!f.output) throw bad("output", "required (a .parquet, .csv, .tsv or .jsonl file)");
  if (path.resolve(f.input) === path.resolve(f.output)) throw bad("output", "must not be the input");
  const ext = path.extname(f.output).toLowerCase();
  if (!(OUTPUT_FORMATS as readonly string[]).includes(ext))
    throw bad("output", `unknown output format '${ext}' (${OUTPUT_FORMATS.join(", ")})`);
  const templates = (["messages", "prompt", "body", "preprocess"] as const).filter((k) => f[k] !== undefined);
  if (templates.length !== 1)
    throw bad(
      undefined,
      `give exactly one of messages, prompt, body or preprocess (${templates.length === 0 ? "none is" : `${templates.join(" and ")} are`} set)`,
    );
  if (f.messages && (endpoint === "/v1/completions" || endpoint === "/v1/embeddings"))
    throw bad("messages", `${endpoint} takes a prompt, not messages`);
  // A rank line is a query and its documents (or text_1 and text_2): a body template says which columns they are.
  if ((endpoint === "/v1/rerank" || endpoint === "/v1/score") && (f.messages || f.prompt))
    throw bad(
      f.messages ? "messages" : "prompt",
      `${endpoint} takes ${endpoint === "/v1/rerank" ? "a query and documents" : "text_1 and text_2"}: give them in a body template (or a preprocess module)`,
    );
  // Anthropic's Messages API requires the model in every request: without one, every row would fail alike.
  if (endpoint === "/v1/messages" && f.model === undefined && (f.messages || f.prompt !== undefined))
    throw bad("model", "/v1/messages names the model in every request: set model (--job-model)");
  checkParams(f, endpoint, bad);
  if (f.response_format && endpoint !== "/v1/chat/completions" && endpoint !== "/v1/responses")
    throw bad("response_format", `works with /v1/chat/completions and /v1/responses, not ${endpoint}`);
  if (f.response_format && (f.body || f.preprocess))
    throw bad("response_format", `put it in the body your ${f.body ? "body template" : "preprocess"} returns`);
  if ((f.params as { encoding_format?: unknown } | undefined)?.encoding_format === "base64")
    throw bad("params.encoding_format", "the table stores the vector itself; leave it float");
  const n = (f.params as { n?: unknown } | undefined)?.n;
  if (n !== undefined && n !== 1) throw bad("params.n", "a dataset row gets one answer (n must be 1)");
}
