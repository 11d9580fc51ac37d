// Batch results back to rows: the output and error lines (in the order they finished) indexed by row, then one
// object of result columns per row in input order, so the table adapter joins them to the input by position.
// A row with no result line is reported, never dropped; a failed row is a row with an error.
import { once } from "node:events";
import { createWriteStream, existsSync } from "node:fs";
import { rename } from "node:fs/promises";
import type { Job } from "./job.js";
import { LineReader } from "./line-reader.js";
import { type Postprocess, rowOf } from "./requests.js";
import { locate, NONE } from "./result-index.js";
import { type ColumnType, DatasetError, type TableInput } from "./tables.js";
import type { Row } from "./template.js";

export interface ResultColumn {
  name: string;
  type: ColumnType;
}

const USAGE: ResultColumn[] = [
  { name: "prompt_tokens", type: "integer" },
  { name: "completion_tokens", type: "integer" },
  { name: "cached_tokens", type: "integer" },
];
const ERROR: ResultColumn[] = [
  { name: "error_code", type: "string" },
  { name: "error_message", type: "string" },
];

/** JSON schema types as column types; anything else keeps its JSON. */
function typeOfSchema(schema: { type?: unknown; items?: { type?: unknown }; enum?: unknown[] } | undefined): ColumnType {
  const t = Array.isArray(schema?.type) ? schema.type.find((x) => x !== "null") : schema?.type;
  if (t === "string" || (t === undefined && schema?.enum?.every((v) => typeof v === "string"))) return "string";
  if (t === "integer") return "integer";
  if (t === "number") return "number";
  if (t === "boolean") return "boolean";
  if (t === "array") {
    const it = schema?.items?.type;
    if (it === "string" || it === "integer" || it === "number") return `${it}[]`;
  }
  return "json";
}

/** The schema's fields when the job asks for JSON by a schema with properties; else none. */
function schemaFields(job: Job): ResultColumn[] | undefined {
  const rf = job.responseFormat as { type?: string; json_schema?: { schema?: { properties?: Record<string, object> } } } | undefined;
  const props = rf?.type === "json_schema" ? rf.json_schema?.schema?.properties : undefined;
  if (!props || Object.keys(props).length === 0) return undefined;
  return Object.entries(props).map(([name, s]) => ({ name, type: typeOfSchema(s) }));
}

/** The columns a job adds to each row, before its postprocess module's. */
export function resultColumns(job: Job): ResultColumn[] {
  if (job.endpoint === "/v1/embeddings")
    return [{ name: "embedding", type: "vector" }, { name: "prompt_tokens", type: "integer" }, ...ERROR];
  // A rerank's results (index and relevance_score, best first), a score line's scores in text_2's order.
  if (job.endpoint === "/v1/rerank") return [{ name: "results", type: "json" }, { name: "prompt_tokens", type: "integer" }, ...ERROR];
  if (job.endpoint === "/v1/score") return [{ name: "scores", type: "json" }, { name: "prompt_tokens", type: "integer" }, ...ERROR];
  const answer = schemaFields(job) ?? [{ name: "text", type: "string" as const }];
  const tools = job.params.tools !== undefined ? [{ name: "tool_calls", type: "json" as const }] : [];
  return [...answer, ...tools, { name: "finish_reason", type: "string" }, ...USAGE, ...ERROR];
}

type Json = Record<string, any>;

/** One answer's columns from a 200 response body of the job's endpoint. */
export function columnsOfResponse(job: Job, body: Json, fields = schemaFields(job)): Record<string, unknown> {
  const usage = body.usage ?? {};
  if (job.endpoint === "/v1/embeddings")
    return { embedding: body.data?.[0]?.embedding ?? null, prompt_tokens: usage.prompt_tokens ?? null };
  if (job.endpoint === "/v1/rerank") return { results: body.results ?? null, prompt_tokens: usage.prompt_tokens ?? null };
  if (job.endpoint === "/v1/score")
    return { scores: Array.isArray(body.data) ? body.data.map((d: Json) => d.score) : null, prompt_tokens: usage.prompt_tokens ?? null };
  let text: string | null = null;
  let finish: string | null = null;
  let toolCalls: unknown = null;
  let tokens: [unknown, unknown, unknown];
  if (job.endpoint === "/v1/responses") {
    const parts = (body.output ?? []).filter((o: Json) => o.type === "message").flatMap((o: Json) => o.content ?? []);
    text =
      parts
        .filter((c: Json) => c.type === "output_text")
        .map((c: Json) => c.text)
        .join("") || null;
    const calls = (body.output ?? []).filter((o: Json) => o.type === "function_call");
    toolCalls = calls.length ? calls : null;
    finish = body.status === "incomplete" ? (body.incomplete_details?.reason ?? "incomplete") : (body.status ?? null);
    tokens = [usage.input_tokens, usage.output_tokens, usage.input_tokens_details?.cached_tokens];
  } else if (job.endpoint === "/v1/messages") {
    text =
      (body.content ?? [])
        .filter((c: Json) => c.type === "text")
        .map((c: Json) => c.text)
        .join("") || null;
    const calls = (body.content ?? []).filter((c: Json) => c.type === "tool_use");
    toolCalls = calls.length ? calls : null;
    finish = body.stop_reason ?? null;
    tokens = [usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens];
  } else {
    const choice = body.choices?.[0] ?? {};
    text = job.endpoint === "/v1/completions" ? (choice.text ?? null) : (choice.message?.content ?? null);
    toolCalls = choice.message?.tool_calls ?? null;
    finish = choice.finish_reason ?? null;
    tokens = [usage.prompt_tokens, usage.completion_tokens, usage.prompt_tokens_details?.cached_tokens];
  }
  // An answer that is not the schema's JSON (cut by max_tokens, say) keeps its finish_reason and tokens beside its error.
  const answer = fields ? parsedFields(text, fields) : { text };
  const tools = job.params.tools !== undefined ? { tool_calls: toolCalls } : {};
  const [prompt_tokens, completion_tokens, cached_tokens] = tokens.map((t) => (typeof t === "number" ? t : 0));
  return { ...answer, ...tools, finish_reason: finish, prompt_tokens, completion_tokens, cached_tokens };
}

/** The schema's fields from the answer's JSON; an answer that is not that JSON is the row's error. */
function parsedFields(text: string | null, fields: ResultColumn[]): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = text === null ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed))
    return {
      error_code: "invalid_json_output",
      error_message: `the answer is not a JSON object: ${JSON.stringify((text ?? "").slice(0, 120))}`,
    };
  const obj = parsed as Record<string, unknown>;
  return Object.fromEntries(fields.map((f) => [f.name, cellOf(obj[f.name])]));
}

/** Absent is null; JSON columns keep the value itself, which the table stores as JSON. */
const cellOf = (v: unknown): unknown => (v === undefined ? null : v);

/** A postprocess module's columns for one row, all or none: it may not write a column the job writes itself. */
async function postprocessed(fn: Postprocess, row: Row, body: unknown, base: readonly ResultColumn[]): Promise<Record<string, unknown>> {
  const added = await fn(row, body);
  const clash = Object.keys(added).find((k) => base.some((c) => c.name === k));
  if (clash !== undefined) throw new Error(`postprocess returned '${clash}', a column the job already writes`);
  return Object.fromEntries(Object.entries(added).map(([k, v]) => [k, v ?? null]));
}

/** An embedding's float list in a result line, found without parsing it; a base64 one does not match. */
const VECTOR = /("embedding"\s*:\s*)(\[[-+0-9.eE,\s]*\])/;
const MARK = "\u0001vector";
const VECTOR_MARK = JSON.stringify(MARK);

export interface ResultsPass {
  rows: number;
  completed: number;
  failed: number;
  /** The result columns, the postprocess module's last, typed from their values. */
  columns: ResultColumn[];
}

/**
 * Writes `target`: one JSON object of result columns per row, in input order. Rows are read from `input` only when
 * a postprocess module needs them.
 */
export async function writeResults(
  job: Job,
  opts: {
    output: string;
    errors: string;
    /** Output and error files of earlier runs whose failed rows this one ran again, oldest first: later answers win. */
    earlier?: Array<{ output: string; errors: string }>;
    rows: number;
    hash: string;
    target: string;
    input: TableInput;
    postprocess?: Postprocess;
  },
): Promise<ResultsPass> {
  const files = [...(opts.earlier ?? []).flatMap((e) => [e.output, e.errors]), opts.output, opts.errors];
  const at = await locate(files, opts.rows, (id) => rowOf(id, opts.hash));
  const missing = at.file.findIndex((f, n) => n >= 1 && f === NONE);
  if (missing !== -1) throw new DatasetError(`row ${missing} has no result yet: run the job again to finish it`);
  const readers = files.map((f) => (existsSync(f) ? new LineReader(f) : undefined));
  const base = resultColumns(job);
  const fields = schemaFields(job);
  const extra = new Map<string, Set<string>>();
  const out = createWriteStream(`${opts.target}.tmp`, { highWaterMark: 1 << 20 });
  let completed = 0;
  let failed = 0;
  const rows = opts.postprocess ? rowsOf(opts.input) : undefined;
  try {
    for (let n = 1; n <= opts.rows; n++) {
      const row = rows ? (await rows.next()).value : undefined;
      const text = readers[at.file[n]]!.read(at.start[n], at.length[n]);
      // A vector goes through as its text: parsing and printing thousands of floats a row was most of this pass.
      const vector = opts.postprocess ? undefined : VECTOR.exec(text);
      const line = JSON.parse(
        vector ? text.slice(0, vector.index + vector[1].length) + VECTOR_MARK + text.slice(vector.index + vector[0].length) : text,
      ) as Json;
      const cols = Object.fromEntries(base.map((c) => [c.name, null])) as Record<string, unknown>;
      const response = line.response as Json | null | undefined;
      if (at.file[n] % 2 === 0 && response?.status_code === 200) {
        Object.assign(cols, columnsOfResponse(job, response.body ?? {}, fields));
        if (!cols.error_code && opts.postprocess && row) {
          try {
            const added = await postprocessed(opts.postprocess, row, response.body, base);
            for (const [k, v] of Object.entries(added)) noteType(extra, k, v);
            Object.assign(cols, added);
          } catch (err) {
            cols.error_code = "postprocess_failed";
            cols.error_message = (err as Error).message;
          }
        }
        if (cols.error_code) failed++;
        else completed++;
      } else {
        const e = (line.error ?? response?.body?.error ?? {}) as Json;
        cols.error_code = e.code ?? e.type ?? `http_${response?.status_code ?? "error"}`;
        cols.error_message = e.message ?? "the request failed";
        failed++;
      }
      const json = JSON.stringify(cols);
      const written = vector && cols.embedding === MARK ? json.replace(VECTOR_MARK, vector[2]) : json;
      if (!out.write(`${written}\n`)) await once(out, "drain");
    }
  } finally {
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    for (const r of readers) r?.close();
    await rows?.return(undefined);
  }
  await rename(`${opts.target}.tmp`, opts.target);
  const added = [...extra].map(([name, types]) => ({ name, type: unify(types) }));
  return { rows: opts.rows, completed, failed, columns: [...base, ...added] };
}

async function* rowsOf(input: TableInput): AsyncGenerator<Row> {
  for await (const chunk of input.rows()) yield* chunk;
}

function noteType(seen: Map<string, Set<string>>, name: string, v: unknown): void {
  const types = seen.get(name) ?? new Set<string>();
  seen.set(name, types);
  if (v === null || v === undefined) return;
  if (typeof v === "number") types.add(Number.isInteger(v) ? "integer" : "number");
  else if (typeof v === "string" || typeof v === "boolean") types.add(typeof v);
  else types.add("json");
}

/** One column type for the values a postprocess column held (integers and numbers make numbers). */
function unify(types: Set<string>): ColumnType {
  if (types.size === 0) return "string";
  if (types.size === 1) return [...types][0] as ColumnType;
  if (types.size === 2 && types.has("integer") && types.has("number")) return "number";
  return "json";
}
