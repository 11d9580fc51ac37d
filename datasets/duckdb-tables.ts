// The table port over DuckDB (@duckdb/node-api): Parquet, CSV/TSV and JSON rows read in chunks with a SQL `where`,
// and the output written by COPY as the input's columns beside the results file, joined by position (both are in
// input order), so neither side is ever sorted or held whole. Why DuckDB: docs/datasets.md.
import { readdir, rename, rm, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import type { DuckDBConnection, DuckDBInstance as Instance, JS } from "@duckdb/node-api";
import { MAX_JSON_DEPTH } from "../openai/json-depth.js";
import { datasetError, firstLine, isOutOfMemory, type LimitNames, type Stage, StepLimit } from "./duckdb-errors.js";
import { checkWhere, whereClause } from "./duckdb-where.js";
import {
  type Column,
  type ColumnType,
  DatasetError,
  INPUT_FORMATS,
  type InputSpec,
  OUTPUT_FORMATS,
  type TableInput,
  type Tables,
  type WriteSpec,
} from "./tables.js";
import type { Cell, Row } from "./template.js";

// Required, not imported: an import of this CommonJS package has Node scan each of its 180 files for their export
// names before running them, which doubled its load (0.2 s against 0.1 s), a share of every dataset job's start.
const { DuckDBInstance } = createRequire(import.meta.url)("@duckdb/node-api") as typeof import("@duckdb/node-api");

export interface DuckTablesOptions {
  /** Where DuckDB may spill when a write outgrows its memory. */
  tempDir: string;
  /** DuckDB's own buffer limit; the process's RSS stays within about this much beyond the runtime's. */
  memoryLimit?: string;
  /**
   * Reads and writes only under `tempDir`, for good: a server runs jobs from its clients, whose `where` is SQL and
   * must not reach another file (an attempt fails as the job's error).
   */
  confine?: boolean;
  /**
   * The longest DuckDB may work on one step of a read (a statement, the next chunk of rows) before it is
   * interrupted and the job fails naming the limit: a server's `where` is its clients' SQL. None: no limit.
   */
  stepLimitMs?: number;
  /**
   * The most DuckDB may spill to `tempDir`, in bytes (a server's reads: a costly `where` would otherwise take up to
   * 90% of the free disk). None: DuckDB's default.
   */
  maxTempBytes?: number;
  /**
   * Told as each bounded step starts (true) and ends (false): a server runs its reads in a process of their own and
   * kills one whose step DuckDB could not interrupt (one function call on one huge value runs to its end).
   */
  onStep?: (running: boolean) => void;
  /** What bounds a read where the caller's user sets it, named in the error that stops one. */
  limitNames?: LimitNames;
  /** A database beginDatabase began, taken over: its folder and bounds are set here, and it closes with the tables. */
  begun?: BegunDatabase;
}

const SQL_TYPES: Record<ColumnType, string> = {
  string: "VARCHAR",
  integer: "BIGINT",
  number: "DOUBLE",
  boolean: "BOOLEAN",
  vector: "FLOAT[]",
  json: "JSON",
  "string[]": "VARCHAR[]",
  "integer[]": "BIGINT[]",
  "number[]": "DOUBLE[]",
};
/** Rows per Parquet row group: small enough that the writer's buffers stay a few MiB on wide rows. */
const ROW_GROUP_ROWS = 16_384;
const dialect = (delim: string) => `header=true, delim=${literal(delim)}, quote='"', escape='"', encoding='utf-8'`;
/** The separators a .csv may use besides commas (Europe's spreadsheets write semicolons), found by DuckDB's sniffer. */
const OTHER_DELIMITERS = [";", "|", "\t"];

const literal = (s: string) => `'${s.replaceAll("'", "''")}'`;
const ident = (s: string) => `"${s.replaceAll('"', '""')}"`;
const extOf = (file: string) => path.extname(file).toLowerCase();

/** What every database here starts with. Parquet and JSON are built in; nothing is ever fetched. */
const STARTING = { threads: "1", autoinstall_known_extensions: "false", autoload_known_extensions: "false" } as const;
const MEMORY_LIMIT = "256MB";

/**
 * Loads what a first read would: DuckDB's library and the catalogue a `where` is checked against (read once per
 * process), so that a process started ahead of its read starts it warm.
 */
export async function warmUp(): Promise<void> {
  const db = await DuckDBInstance.create(":memory:", STARTING);
  const conn = await db.connect();
  try {
    await checkWhere(conn, "TRUE", []);
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

/** One open adapter: its database, the connection its statements run on, and the views its inputs read. */
interface Duck {
  db: Instance;
  admin: DuckDBConnection;
  opts: DuckTablesOptions;
  views: number;
  /** The view each opened input reads, and how a fault reading it is told (its where's, on a server). */
  opened: WeakMap<TableInput, { view: string; fault: (err: unknown) => never }>;
}

export async function openDuckTables(opts: DuckTablesOptions): Promise<Tables> {
  const duck: Duck = { ...(await openDatabase(opts)), opts, views: 0, opened: new WeakMap() };
  return {
    open: (spec) => openInput(duck, spec),
    write: (input, spec) => writeTable(duck, input, spec),
    outputTypes,
    async close() {
      duck.admin.closeSync();
      duck.db.closeSync();
    },
  };
}

/**
 * A database begun before its folder is known, for openDuckTables to take (`begun`): DuckDB starts in a thread of
 * its own, in 35-55 ms, while the caller goes on (a dataset job reads its settings meanwhile).
 */
export const beginDatabase = (): BegunDatabase => DuckDBInstance.create(":memory:", { ...STARTING, memory_limit: MEMORY_LIMIT });

/** A database beginDatabase began, until openDuckTables takes it. */
export type BegunDatabase = Promise<Instance>;

/** Closes a begun database that no tables took. */
export const discardDatabase = (begun: BegunDatabase): void =>
  void begun.then(
    (db) => db.closeSync(),
    () => undefined,
  );

/** The in-memory database with its bounds, and, for a server's clients, confined to the temp folder and locked so. */
async function openDatabase(opts: DuckTablesOptions) {
  const memory = opts.memoryLimit ?? MEMORY_LIMIT;
  const db = await (opts.begun ?? DuckDBInstance.create(":memory:", { ...STARTING, memory_limit: memory, temp_directory: opts.tempDir }));
  const admin = await db.connect();
  if (opts.begun) {
    await admin.run(`SET temp_directory = ${literal(opts.tempDir)}`);
    if (memory !== MEMORY_LIMIT) await admin.run(`SET memory_limit = ${literal(memory)}`);
  }
  // Set here, not at create: DuckDB 1.5 shows a create's max_temp_directory_size but spills past it.
  if (opts.maxTempBytes !== undefined)
    await admin.run(`SET max_temp_directory_size = '${Math.max(1, Math.ceil(opts.maxTempBytes / 1024))}KiB'`);
  if (opts.confine) {
    const dir = `${path.resolve(opts.tempDir)}${path.sep}`;
    await admin.run(`SET allowed_directories = [${literal(dir)}]`);
    // A time with a zone reads and prints in UTC, not in the server's own zone.
    await admin.run("SET TimeZone = 'UTC'");
    await admin.run("SET Calendar = 'gregorian'");
    await admin.run("SET enable_external_access = false");
    await admin.run("SET lock_configuration = true");
  }
  return { db, admin };
}

const describedColumns = (r: { getRowObjectsJS(): Record<string, JS>[] }): Column[] =>
  r.getRowObjectsJS().map((row) => ({ name: String(row.column_name), type: String(row.column_type) }));

/** An input as a view over its files (and its where and limit), its columns read; its rows are read on demand. */
async function openInput(duck: Duck, spec: InputSpec): Promise<TableInput> {
  const { admin, opts } = duck;
  const { files, format } = await resolveFiles(admin, spec.input);
  const clientSql = opts.confine === true;
  const source = await (format === ".arrow"
    ? arrowSql(files, path.join(opts.tempDir, `arrow-${duck.views + 1}`))
    : readerSql(admin, files, format)
  ).catch((err) => {
    throw datasetError(err, { spec, files, stage: "file", clientSql, limitNames: opts.limitNames });
  });
  const view = `job_input_${++duck.views}`;
  const where = spec.where === undefined ? "" : ` ${whereClause(spec.where)}`;
  const limit = spec.limit === undefined ? "" : ` LIMIT ${spec.limit}`;
  let fileColumns: Column[] | undefined;
  const failed = (stage: Stage) => (err: unknown) => {
    throw datasetError(err, { spec, files, stage, clientSql, limitNames: opts.limitNames, columns: fileColumns });
  };
  const run = (sql: string, stage: Stage) => bounded(admin, opts, () => admin.runAndReadAll(sql)).catch(failed(stage));
  // The file is opened on its own first, so that a fault is named where it lies: the file's, or the where's.
  await run(`CREATE VIEW ${view}_file AS SELECT * FROM ${source}`, "file");
  if (spec.where !== undefined) {
    fileColumns = describedColumns(await run(`DESCRIBE ${view}_file`, "file"));
    const names = fileColumns.map((c) => c.name);
    // The where is read once to render the requests and once to join the answers back by place, and it is SQL
    // from a client on a server: it may use the row's own values and nothing else.
    await checkWhere(admin, spec.where, names).catch(failed("where"));
  }
  await run(`CREATE VIEW ${view} AS SELECT * FROM ${view}_file${where}${limit}`, "where");
  const columns = describedColumns(await run(`DESCRIBE ${view}`, "where"));
  const input: TableInput = {
    files,
    columns,
    rows: () => viewRows(duck, view, failed("rows")),
    async count() {
      const r = await run(`SELECT count(*) AS n FROM ${view}`, "rows");
      return Number(r.getRowsJS()[0][0]);
    },
  };
  duck.opened.set(input, { view, fault: failed("rows") });
  return input;
}

/**
 * A view's rows in chunks, on a connection of their own, each chunk's fetch bounded. The next chunk is fetched (in
 * DuckDB's thread) while the consumer works on this one: waiting for each in turn left a fifth of a job's reading idle.
 */
async function* viewRows(duck: Duck, view: string, failed: (err: unknown) => never): AsyncGenerator<Row[]> {
  const { db, opts } = duck;
  const conn = await db.connect();
  let ahead: Promise<IteratorResult<Record<string, JS>[]>> | undefined;
  try {
    const result = await bounded(conn, opts, () => conn.stream(`SELECT * FROM ${view}`)).catch(failed);
    const chunks = result.yieldRowObjectJs()[Symbol.asyncIterator]();
    const fetch = () => {
      const next = bounded(conn, opts, () => chunks.next());
      // Handled when it is awaited; until then its failure must not count as unhandled.
      next.catch(() => undefined);
      return next;
    };
    ahead = fetch();
    for (;;) {
      const next = await ahead.catch(failed);
      if (next.done) break;
      ahead = fetch();
      yield next.value.map(toRow);
    }
  } finally {
    // A consumer that stopped early leaves a fetch under way: the connection closes once it is over.
    await ahead?.catch(() => undefined);
    conn.closeSync();
  }
}

/** The kept columns beside the results, COPY'd to a temp name in the output's folder and renamed into place. */
async function writeTable(duck: Duck, input: TableInput, spec: WriteSpec): Promise<number> {
  const { admin, opts } = duck;
  const ext = extOf(spec.output);
  if (!(OUTPUT_FORMATS as readonly string[]).includes(ext))
    throw new DatasetError(`${spec.output}: unknown output format '${ext}' (${OUTPUT_FORMATS.join(", ")})`);
  const from = duck.opened.get(input);
  if (!from) throw new Error("write() takes a TableInput that this adapter opened");
  const select = `SELECT ${outputColumns(input, spec, ext).join(", ")} FROM ${from.view} i POSITIONAL JOIN ${resultsSource(spec, ext)} r`;
  const temp = `${spec.output}.tmp-${process.pid}${ext}`;
  await clearStaleParts(spec.output);
  try {
    // The input's where runs again here, so the write is a step as bounded as the reads.
    const out = await bounded(admin, opts, () => admin.run(`COPY (${select}) TO ${literal(temp)} (${copyOptions(ext)})`));
    const rows = Number(out.rowsChanged);
    await rename(temp, spec.output);
    return rows;
  } catch (err) {
    await rm(temp, { force: true });
    if (err instanceof StepLimit || (opts.confine && isOutOfMemory(err))) from.fault(err);
    throw new DatasetError(`${spec.output}: ${firstLine(err)}`);
  }
}

/** The select list of a write: the input's kept columns (`i`), then the results' (`r`). CSV has no lists or structs: they go in as JSON text, as a vector does. */
function outputColumns(input: TableInput, spec: WriteSpec, ext: string): string[] {
  const types = new Map(input.columns.map((c) => [c.name, c.type]));
  const flat = ext === ".csv" || ext === ".tsv";
  const keep = spec.keep.map((name) =>
    flat && nested(types.get(name) ?? "") ? `to_json(i.${ident(name)}) AS ${ident(name)}` : `i.${ident(name)}`,
  );
  const results = spec.columns.map((c) =>
    flat && nested(sqlType(c.type, ext))
      ? `to_json(r.${ident(c.name)}) AS ${ident(c.as ?? c.name)}`
      : `r.${ident(c.name)} AS ${ident(c.as ?? c.name)}`,
  );
  return [...keep, ...results];
}

function copyOptions(ext: string): string {
  if (ext === ".parquet") return `FORMAT parquet, ROW_GROUP_SIZE ${ROW_GROUP_ROWS}`;
  if (ext === ".csv") return "FORMAT csv, HEADER true";
  if (ext === ".tsv") return "FORMAT csv, HEADER true, DELIMITER '\\t'";
  return "FORMAT json";
}

/** A run killed mid-write left its part under a name no reader takes for the table: cleared before the next. */
async function clearStaleParts(output: string): Promise<void> {
  const stale = `${path.basename(output)}.tmp-`;
  for (const f of await readdir(path.dirname(output)).catch(() => [])) {
    if (f.startsWith(stale)) await rm(path.join(path.dirname(output), f), { force: true });
  }
}

function outputTypes(input: TableInput, spec: Omit<WriteSpec, "results">): Column[] {
  const ext = extOf(spec.output);
  const flat = ext === ".csv" || ext === ".tsv";
  const types = new Map(input.columns.map((c) => [c.name, c.type]));
  const as = (type: string) => (flat && nested(type) ? "JSON" : type);
  return [
    ...spec.keep.map((name) => ({ name, type: as(types.get(name) ?? "") })),
    ...spec.columns.map((c) => ({ name: c.as ?? c.name, type: as(sqlType(c.type, ext)) })),
  ];
}

function sqlType(type: ColumnType, ext: string): string {
  // Parquet keeps a vector as list<float32>; text formats write the engine's values as they came.
  if (type === "vector" && ext !== ".parquet") return "DOUBLE[]";
  return SQL_TYPES[type];
}

/**
 * The results, one row per input row in input order: the JSONL file the answers were written to, or an earlier
 * output table of the same job (whose columns are read as text where its format stored them so, then typed).
 */
function resultsSource(spec: WriteSpec, ext: string): string {
  if (!spec.resultsTable) {
    const declared = spec.columns.map((c) => `${literal(c.name)}: ${literal(sqlType(c.type, ext))}`).join(", ");
    return `read_json(${literal(spec.results)}, format='newline_delimited', columns={${declared}})`;
  }
  const from = extOf(spec.results);
  const file = literal(spec.results);
  const reader =
    from === ".parquet"
      ? `read_parquet(${file})`
      : from === ".csv" || from === ".tsv"
        ? `read_csv(${file}, ${dialect(from === ".tsv" ? "\t" : ",")}, all_varchar=true, allow_quoted_nulls=false)`
        : `read_json(${file}, format='newline_delimited', sample_size=-1)`;
  const typed = spec.columns.map((c) => `CAST(${ident(c.name)} AS ${sqlType(c.type, ext)}) AS ${ident(c.name)}`);
  return `(SELECT ${typed.join(", ")} FROM ${reader})`;
}

const nested = (sqlTypeName: string) => /\[\d*\]$|^(STRUCT|MAP|UNION)\(|^JSON$/.test(sqlTypeName);

async function resolveFiles(conn: DuckDBConnection, input: string): Promise<{ files: string[]; format: string }> {
  let files: string[];
  if (/[*?[]/.test(input)) {
    const r = await conn.runAndReadAll(`SELECT file FROM glob(${literal(input)}) ORDER BY file`).catch((err) => {
      throw new DatasetError(`${input}: ${firstLine(err)}`);
    });
    files = r.getRowsJS().map((row) => String(row[0]));
    if (files.length === 0) throw new DatasetError(`${input}: no file matches`);
  } else {
    const s = await stat(input).catch(() => null);
    if (!s) throw new DatasetError(`${input}: no such file or folder`);
    if (s.isDirectory()) {
      const names = (await readdir(input)).filter((n) => (INPUT_FORMATS as readonly string[]).includes(extOf(n))).sort();
      if (names.length === 0) throw new DatasetError(`${input}: the folder holds no ${INPUT_FORMATS.join(", ")} file`);
      files = names.map((n) => path.join(input, n));
    } else files = [input];
  }
  const formats = new Set(files.map(extOf).map((e) => (e === ".ndjson" ? ".jsonl" : e)));
  if (formats.size > 1) throw new DatasetError(`${input}: parts of different formats (${[...formats].join(", ")})`);
  const [format] = formats;
  if (!(INPUT_FORMATS as readonly string[]).includes(format))
    throw new DatasetError(`${files[0]}: unknown input format '${format}' (${INPUT_FORMATS.join(", ")})`);
  for (const f of files) {
    if ((await stat(f)).size === 0) throw new DatasetError(`${f}: empty file`);
  }
  return { files, format };
}

/** Arrow IPC parts as JSON rows with their Arrow types declared (arrow-ipc.ts). */
async function arrowSql(files: string[], prefix: string): Promise<string> {
  // apache-arrow takes a quarter of a second to load: only a job that reads Arrow pays it.
  const { arrowToJsonl } = await import("./arrow-ipc.js");
  const parts: string[] = [];
  let columns: string | undefined;
  for (const [i, f] of files.entries()) {
    const part = `${prefix}-${i}.jsonl`;
    const cols = (await arrowToJsonl(f, part)).map((c) => `${literal(c.name)}: ${literal(SQL_TYPES[c.type])}`).join(", ");
    if (columns !== undefined && cols !== columns) throw new DatasetError(`${f}: its columns differ from ${files[0]}'s`);
    columns = cols;
    parts.push(part);
  }
  return `read_json([${parts.map(literal).join(", ")}], format='newline_delimited', columns={${columns}})`;
}

/**
 * The table reading `files`. CSV columns are found first, then read strictly so a ragged row is an error. A quoted
 * empty field ("") is an empty string and an unquoted one (,,) a missing value, as DuckDB's writer writes them, so
 * the two stay apart through every round trip; in a column of numbers, dates or booleans "" can only be missing.
 */
async function readerSql(conn: DuckDBConnection, files: string[], format: string): Promise<string> {
  const list = `[${files.map(literal).join(", ")}]`;
  if (format === ".parquet") return `read_parquet(${list}, union_by_name=true)`;
  // Past the depth a request body may nest, a value is kept as JSON text: typed as nested structs, a value nested
  // thousands deep would overflow the stack as its rows are read.
  const depth = `maximum_depth=${MAX_JSON_DEPTH}`;
  if (format === ".jsonl") return `read_json(${list}, format='newline_delimited', sample_size=-1, ${depth})`;
  if (format === ".json") return `read_json(${list}, sample_size=-1, ${depth})`;
  const describe = async (delim: string) =>
    (await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_csv(${list}, ${dialect(delim)}, ignore_errors=true, sample_size=-1)`))
      .getRowObjectsJS()
      .map((r) => ({ name: String(r.column_name), type: String(r.column_type) }));
  let delim = format === ".tsv" ? "\t" : ",";
  let columns = await describe(delim);
  if (format === ".csv" && columns.length === 1) {
    // One column read with commas: the file may separate its fields otherwise; the first file's sniffed separator
    // is taken where it makes more columns of every file.
    const sniffed = await conn.runAndReadAll(`SELECT Delimiter FROM sniff_csv(${literal(files[0])})`);
    const found = String(sniffed.getRowObjectsJS()[0]?.Delimiter ?? ",");
    if (OTHER_DELIMITERS.includes(found)) {
      const other = await describe(found);
      if (other.length > 1) [delim, columns] = [found, other];
    }
  }
  const declared = columns.map((c) => `${literal(c.name)}: 'VARCHAR'`).join(", ");
  const typed = columns.map((c) =>
    c.type === "VARCHAR" ? ident(c.name) : `CAST(NULLIF(${ident(c.name)}, '') AS ${c.type}) AS ${ident(c.name)}`,
  );
  const read = `read_csv(${list}, ${dialect(delim)}, allow_quoted_nulls=false, auto_detect=false, strict_mode=true, null_padding=false, columns={${declared}})`;
  return `(SELECT ${typed.join(", ")} FROM ${read})`;
}

/**
 * `work` on `conn`, interrupted once it has taken `stepLimitMs`; then a StepLimit. Its start and end are told to
 * `onStep`. A step that was interrupted is a StepLimit even when it resolves: a stream DuckDB stopped can end as an
 * empty result, not an error, and a read would then pass for one that found no rows.
 */
async function bounded<T>(conn: DuckDBConnection, opts: DuckTablesOptions, work: () => Promise<T>): Promise<T> {
  const limitMs = opts.stepLimitMs;
  let stopped = false;
  const timer = limitMs
    ? setTimeout(() => {
        stopped = true;
        conn.interrupt();
      }, limitMs)
    : undefined;
  // Only the timer sets `stopped`, so a step it stopped had a limit.
  const overran = () => new StepLimit(limitMs as number, opts.limitNames?.time);
  opts.onStep?.(true);
  let out: T;
  try {
    out = await work();
  } catch (err) {
    throw stopped ? overran() : err;
  } finally {
    clearTimeout(timer);
    opts.onStep?.(false);
  }
  if (stopped) throw overran();
  return out;
}

/** A DuckDB value as a template cell: 64-bit integers as numbers where exact, dates as ISO text, bytes as base64. */
function toCell(v: JS, depth = 1): Cell {
  if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) ? Number(v) : v;
  if (v instanceof Date) return v.toISOString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  // A table's own types may nest (Parquet's): past a request body's bound the row is refused, not walked on.
  if (v !== null && typeof v === "object" && depth > MAX_JSON_DEPTH)
    throw new DatasetError(`a value nests more than ${MAX_JSON_DEPTH} levels deep, more than a request body may`);
  if (Array.isArray(v)) return v.map((x) => toCell(x, depth + 1));
  if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toCell(x, depth + 1)]));
  return v;
}

const toRow = (r: Record<string, JS>): Row => toCell(r) as Row;
