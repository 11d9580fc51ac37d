// A dataset's rows as batch request lines: each row's body from the job's template (or its preprocess module),
// under a custom_id made of the row's place in the filtered input and the job's hash, so a resume, a retry and the
// join back all find the same row again. The first row that cannot be rendered stops the job before anything runs.
import { createHash } from "node:crypto";
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { readFile, rename, stat } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import { nearestKey } from "../config/known-keys.js";
import { RequestError } from "../openai/errors.js";
import { parseRequest } from "../parse/request.js";
import type { Job } from "./job.js";
import { JobError, notInTable, parametersOf } from "./job.js";
import { type Column, DatasetError, type TableInput } from "./tables.js";
import { columnsOf, RenderError, type Row, render } from "./template.js";

export type Preprocess = (row: Row) => Record<string, unknown> | Promise<Record<string, unknown>>;
export type Postprocess = (row: Row, response: unknown) => Record<string, unknown> | Promise<Record<string, unknown>>;

const ID = /^row-(\d+)-([0-9a-f]{12})$/;

/** Row `n` (1-based, in the filtered input) of the job with this hash. */
export const customId = (n: number, hash: string) => `row-${n}-${hash}`;

/** The row number a custom_id names, if it is one of this job's. */
export function rowOf(id: string, hash: string): number | undefined {
  const m = ID.exec(id);
  return m && m[2] === hash ? Number(m[1]) : undefined;
}

/**
 * What makes the job's requests and answers what they are: the template and parameters, the filter, the input files
 * as they stand (size and time), and what serves them where the caller says (`servedBy`). Changing any of them starts
 * afresh; `postprocess`, `keep` and the output format do not.
 */
export async function jobHash(job: Job, files: readonly string[], servedBy?: string): Promise<string> {
  const h = createHash("sha256");
  // What answers the rows, where the caller knows it: answers of another model are not this job's.
  if (servedBy !== undefined) h.update(`served by ${servedBy}\n`);
  h.update(JSON.stringify(requestFields(job)));
  for (const f of files) {
    const s = await stat(f);
    h.update(`\n${f}\t${s.size}\t${s.mtimeMs}`);
  }
  if (job.preprocess) h.update(await readFile(job.preprocess));
  return h.digest("hex").slice(0, 12);
}

/** The job's fields that make its rows' requests from their columns, and so with the rows, its answers. */
export function requestFields(job: Job) {
  const { endpoint, model, messages, prompt, body, params, paramsFrom, responseFormat, where, limit } = job;
  return { endpoint, model, messages, prompt, body, params, paramsFrom, responseFormat, where, limit };
}

/**
 * The job's name for its working files: what makes its requests, with the input as named rather than as its files
 * stand, so that it is known before the input is opened; `jobHash` then tells an input changed since.
 */
export function jobKey(job: Job): string {
  const { endpoint, model, messages, prompt, body, params, paramsFrom, responseFormat, where, limit, input, preprocess } = job;
  const named = { endpoint, model, messages, prompt, body, params, paramsFrom, responseFormat, where, limit, input, preprocess };
  return createHash("sha256").update(JSON.stringify(named)).digest("hex").slice(0, 12);
}

/** Loads a user's module and checks it exports a function (its default, or one of the given names). */
export async function loadHook<T>(file: string, field: string): Promise<T> {
  let mod: Record<string, unknown>;
  try {
    mod = await import(pathToFileURL(file).href);
  } catch (err) {
    throw new JobError(`${field}: cannot load ${file}: ${(err as Error).message.split("\n")[0]}`);
  }
  const fn = mod.default ?? mod[field];
  if (typeof fn !== "function") throw new JobError(`${field}: ${file} exports no function (export default (row) => ...)`);
  return fn as T;
}

/** Every column the job reads, checked against the input's columns before any row is. */
export function checkColumns(job: Job, columns: readonly Column[], label: string): void {
  const have = new Set(columns.map((c) => c.name));
  const uses: Array<[string, string[]]> = [
    ["messages", columnsOf(job.messages)],
    ["prompt", columnsOf(job.prompt)],
    ["body", columnsOf(job.body)],
    ["params", columnsOf(job.params)],
    ["params_from", Object.values(job.paramsFrom)],
    ["keep", job.keep ?? []],
  ];
  for (const [field, names] of uses) {
    const missing = names.find((n) => !have.has(n));
    if (missing !== undefined)
      throw new DatasetError(
        `${label}: ${field}: no column '${missing}' (the input has ${[...have].map((c) => `'${c}'`).join(", ")})${oneColumnHint(columns)}`,
      );
  }
}

/** A table read as one column whose name holds a separator: its fields are likely separated otherwise. */
function oneColumnHint(columns: readonly Column[]): string {
  const sep = columns.length === 1 ? /[;|:\t,]/.exec(columns[0].name)?.[0] : undefined;
  if (sep === undefined) return "";
  const shown = sep === "\t" ? "tabs" : `'${sep}'`;
  return `; it was read as one column, whose name holds ${shown}: save it with commas (or tabs, as a .tsv)`;
}

/** One row's request body. */
export async function bodyOf(job: Job, row: Row, preprocess?: Preprocess): Promise<Record<string, unknown>> {
  return completeBody(job, row, preprocess ? { ...(await preprocess(row)) } : undefined);
}

/** A body from the template, or the one a preprocess module made, with the job's model and parameters. */
function completeBody(job: Job, row: Row, made?: Record<string, unknown>): Record<string, unknown> {
  const body: Record<string, unknown> = made ?? (job.body ? render(job.body, row) : fromTemplate(job, row));
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw new RenderError("", "preprocess must return an object (the request body)");
  if (job.model !== undefined && body.model === undefined) body.model = job.model;
  Object.assign(body, render(job.params, row));
  for (const [param, column] of Object.entries(job.paramsFrom)) {
    const value = row[column];
    // A null leaves the parameter to the job's params or the endpoint's default.
    if (value !== null && value !== undefined) body[param] = typeof value === "bigint" ? Number(value) : value;
  }
  return body;
}

function fromTemplate(job: Job, row: Row): Record<string, unknown> {
  const messages = job.messages ? render(job.messages, row) : undefined;
  const prompt = job.prompt === undefined ? undefined : render(job.prompt, row);
  const asMessages = messages ?? [{ role: "user", content: prompt }];
  const rf = job.responseFormat;
  switch (job.endpoint) {
    case "/v1/completions":
      return { prompt };
    case "/v1/embeddings":
      return { input: prompt };
    case "/v1/responses": {
      const text = rf ? { text: { format: responsesFormat(rf) } } : {};
      return { input: messages ?? prompt, ...text };
    }
    case "/v1/messages": {
      const system = asMessages.filter((m) => m.role === "system" || m.role === "developer").map((m) => m.content);
      const rest = asMessages.filter((m) => m.role !== "system" && m.role !== "developer");
      return { ...(system.length ? { system: system.join("\n\n") } : {}), messages: rest };
    }
    default:
      return { messages: asMessages, ...(rf ? { response_format: rf } : {}) };
  }
}

/** Chat's `{type, json_schema: {name, schema, strict}}` in the Responses API's flat form. */
function responsesFormat(rf: Record<string, unknown>): Record<string, unknown> {
  const { json_schema, ...rest } = rf as { json_schema?: Record<string, unknown> };
  return json_schema ? { ...rest, ...json_schema } : rest;
}

export interface RenderOptions {
  hash: string;
  /** How the input is named in errors. */
  label: string;
  preprocess?: Preprocess;
  /** Stop after this many rows (--dry-run). */
  max?: number;
  /** The largest request line and file the batch will take, with the settings that set them (MAX_LINE_BYTES, MAX_FILE_BYTES). */
  sizes?: RequestSizes;
}

export interface RequestSizes {
  maxLineBytes: number;
  maxFileBytes: number;
}

/** "row 3", or where a where filters, "row 3 of those the where keeps": the number a user can find again. */
const rowName = (job: Job, n: number) => (job.where === undefined ? `row ${n}` : `row ${n} of those the where keeps`);

/** What writeRequests wrote: its lines, each checked as the endpoint checks a request. */
export interface WrittenRequests {
  rows: number;
  /** The model the first line naming one names (none: the default model's). */
  model?: string;
  /** Lines name models other than `model`. */
  mixedModels: boolean;
}

/** Writes one request line per row to `file` (by a temporary name, renamed when whole). */
export async function writeRequests(job: Job, input: TableInput, file: string, opts: RenderOptions): Promise<WrittenRequests> {
  const temp = `${file}.tmp`;
  const out = createWriteStream(temp, { highWaterMark: 1 << 20 });
  let n = 0;
  let bytes = 0;
  let model: string | undefined;
  let mixedModels = false;
  const maxFileBytes = opts.sizes?.maxFileBytes ?? Number.POSITIVE_INFINITY;
  try {
    for await (const rows of renderedRows(job, input, opts)) {
      for (const { line, model: named } of rows) {
        n++;
        if (named !== undefined) {
          model ??= named;
          mixedModels ||= named !== model;
        }
        bytes += Buffer.byteLength(line) + 1;
        // Refused here, naming the setting, rather than as a batch that fails its validation once created.
        if (bytes > maxFileBytes)
          throw new DatasetError(
            `${opts.label}: its request lines pass MAX_FILE_BYTES (${maxFileBytes} bytes) at ${rowName(job, n)}, the largest input file a batch takes: use a where or a limit, or split the dataset`,
          );
        if (!out.write(`${line}\n`)) await once(out, "drain");
      }
    }
  } finally {
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  }
  if (n === 0) throw new DatasetError(`${opts.label}: no rows${job.where ? ` match the where '${job.where}'` : ""}`);
  await rename(temp, file);
  return { rows: n, ...(model !== undefined ? { model } : {}), mixedModels };
}

/** The request lines, a chunk of rows at a time (a promise per row cost as much as rendering it). */
export async function* requestLines(job: Job, input: TableInput, opts: RenderOptions): AsyncGenerator<string[]> {
  for await (const rows of renderedRows(job, input, opts)) yield rows.map((r) => r.line);
}

/** Each row's request line and the model its body names, a chunk of rows at a time. */
async function* renderedRows(job: Job, input: TableInput, opts: RenderOptions): AsyncGenerator<Array<{ line: string; model?: string }>> {
  let n = 0;
  for await (const chunk of input.rows()) {
    const lines: Array<{ line: string; model?: string }> = [];
    for (const row of chunk) {
      n++;
      const rowAt = `${opts.label}: ${rowName(job, n)}`;
      let body: Record<string, unknown>;
      try {
        body = completeBody(job, row, opts.preprocess ? { ...(await opts.preprocess(row)) } : undefined);
      } catch (err) {
        if (err instanceof RenderError) throw new DatasetError(`${rowAt}${err.column ? `, column '${err.column}'` : ""}: ${err.message}`);
        throw new DatasetError(`${rowAt}: preprocess failed: ${(err as Error).message}`);
      }
      checkBody(job, body, rowAt);
      const line = toJson({ custom_id: customId(n, opts.hash), method: "POST", url: job.endpoint, body });
      const size = Buffer.byteLength(line);
      if (opts.sizes && size > opts.sizes.maxLineBytes)
        throw new DatasetError(
          `${rowAt}: its request is ${size} bytes, more than MAX_LINE_BYTES (${opts.sizes.maxLineBytes}), the longest line a batch takes`,
        );
      lines.push(typeof body.model === "string" ? { line, model: body.model } : { line });
      if (opts.max !== undefined && n >= opts.max) break;
    }
    if (lines.length) yield lines;
    if (opts.max !== undefined && n >= opts.max) return;
  }
}

/** A body the endpoint would refuse stops the job here, naming the column that fed the field at fault. */
function checkBody(job: Job, body: Record<string, unknown>, where: string): void {
  try {
    parseRequest(job.endpoint, body);
  } catch (err) {
    if (!(err instanceof RequestError)) throw err;
    const top = err.param?.split(/[.[]/)[0];
    const column = top ? job.paramsFrom[top] : undefined;
    // A misspelt key of a body template (or of a preprocess module's body) is named with the nearest, as params' are.
    const near = err.code === "unknown_parameter" && err.param ? nearestKey(err.param, parametersOf(job.endpoint)) : undefined;
    const said = near ? `${err.message.replace(/\.$/, "")} (did you mean '${near}'?)` : err.message;
    // A value the job itself gives, the same in every row, is the job's fault, not the row's.
    if (top && !column && top in job.params && !JSON.stringify(job.params[top]).includes("{{"))
      throw new JobError(`params.${top}: ${said}`, `params.${top}`);
    throw new DatasetError(`${where}${column ? `, column '${column}'` : ""}: ${said}`);
  }
  for (const key of Object.keys(body)) {
    const why = notInTable(job, key);
    if (why) throw new DatasetError(`${where}: ${key}: ${why}`);
  }
}

/** JSON with a 64-bit integer too large for a number written as the nearest one; a replacer on every line doubled the cost. */
function toJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
    return JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? Number(v) : v));
  }
}
