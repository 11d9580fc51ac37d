// DuckDB's errors as a dataset's: one line naming the file and, where the format has one, the row, or the `where`.
// A client's `where` (a server's confined reads) is told back by its clause and its kind only, with the parts it
// wrote itself: DuckDB's text can hold any value a query reached (a setting, a path, the version), so the whole text
// is the error's detail, for the server's log.
import { DatasetError, type InputSpec } from "./tables.js";

/** What bounds a read, as the caller's user sets it (`DATASET_STEP_SECONDS`), said in the error that stops one. */
export interface LimitNames {
  memory?: string;
  time?: string;
}

const inParens = (name: string | undefined) => (name ? ` (${name})` : "");

/** A read stopped for its memory: DuckDB's own limits, or the process's it runs in. */
export const outOfMemory = (name?: string) =>
  `it needed more memory or scratch disk than one dataset read may take here${inParens(name)}, so it was stopped (a costly where?)`;

/** A read stopped for its time: one step ran past the limit. */
export const pastStepLimit = (ms: number, name?: string) =>
  `it took longer than ${ms / 1000} s, the most one step of a dataset read may take here${inParens(name)}, so it was stopped (a costly where?)`;

/**
 * DuckDB could not allocate: its own limits, or the process's (an allocation outside its buffer manager fails as
 * the C++ runtime's bad_alloc).
 */
export const isOutOfMemory = (err: unknown) => /^Out of Memory Error|\bbad_alloc\b/.test(err instanceof Error ? err.message : String(err));

/** DuckDB took longer than a step may (stepLimitMs): it was interrupted. */
export class StepLimit extends Error {
  constructor(
    readonly ms: number,
    name?: string,
  ) {
    super(pastStepLimit(ms, name));
  }
}

/** Where in a read the error arose: opening the file, binding the `where`, or reading rows (either's fault). */
export type Stage = "file" | "where" | "rows";

export interface ErrorContext {
  spec: InputSpec;
  files: readonly string[];
  stage: Stage;
  /** The `where` is a client's: its errors name no value DuckDB's text holds. */
  clientSql: boolean;
  limitNames?: LimitNames;
  /** The file's columns and their types, once known: a where comparing mismatched types is told which of them. */
  columns?: ReadonlyArray<{ name: string; type: string }>;
}

/** What each kind of DuckDB error means, said to a client whose `where` raised it. */
const KINDS: Record<string, string> = {
  "Binder Error": "a name it uses is not a column of the dataset, or a function is given what it does not take",
  "Parser Error": "it is not valid SQL",
  "Catalog Error": "it names a function or table that does not exist",
  "Conversion Error": "a value could not be converted to the type asked for",
  "Invalid Input Error": "a function was given a value it does not take",
  "Out of Range Error": "a value is out of its type's range",
  "Permission Error": "it reaches outside the dataset, which a where may not",
  "IO Error": "it reaches outside the dataset, which a where may not",
  "Not implemented Error": "it uses something DuckDB does not do here",
};

/**
 * DuckDB's own sentences that may be told back, because each part they quote (a column, a token, a function, a file)
 * is one the client wrote in its `where`: checked, not assumed. `say` rewrites one whose quote runs past the where
 * into the query around it.
 */
const TOLD_BACK: Array<{ re: RegExp; say?: (m: RegExpExecArray) => string }> = [
  { re: /^Referenced column "([^"]+)" not found in FROM clause!/ },
  { re: /^syntax error at or near "([^"]*)"/ },
  // The where is read as `(<where>\n)`: DuckDB quotes the string to its end, newline and parenthesis included.
  { re: /^unterminated quoted string at or near "([^"]*?)(?:\)?"|$)/, say: (m) => `unterminated quoted string at or near "${m[1]}"` },
  { re: /^(?:Scalar|Table|Aggregate) Function with name (\S+) does not exist!/ },
  { re: /^Table with name (\S+) does not exist!/ },
  { re: /^Cannot access file "([^"]+)" - file system operations are disabled by configuration/ },
];

export function datasetError(err: unknown, ctx: ErrorContext): DatasetError {
  if (err instanceof DatasetError) return err;
  const { spec, files } = ctx;
  const label = files.length === 1 ? files[0] : spec.input;
  // A read stopped at a limit is the where's doing where there is one: a read of the file alone is bounded too.
  if (err instanceof StepLimit)
    return spec.where === undefined
      ? new DatasetError(`${label}: ${err.message}`, undefined, undefined, "time")
      : new DatasetError(`where: ${err.message}`, undefined, "where", "time");
  const message = err instanceof Error ? err.message : String(err);
  const csv = /CSV Error on Line: (\d+)\n(?:Original Line: .*\n)?(.*)/.exec(message);
  const file = /file = (.+)/.exec(message)?.[1]?.trim() ?? label;
  if (csv) return new DatasetError(`${file}: row ${Number(csv[1]) - 1}: ${csv[2].trim()}`);
  const json = /Malformed JSON in file "([^"]+)", at byte \d+ in line (\d+): (.*?)\.?\s*(\n|$)/.exec(message);
  // DuckDB 1.5 counts this line one past the line at fault (the pinned version; the contract test holds it).
  if (json) return new DatasetError(`${json[1]}: row ${Number(json[2]) - 1}: malformed JSON (${json[3].trim()})`);
  if (ctx.clientSql && isOutOfMemory(message)) {
    const said = outOfMemory(ctx.limitNames?.memory);
    return spec.where === undefined
      ? new DatasetError(`${label}: ${said}`, message, undefined, "memory")
      : new DatasetError(`where: ${said}`, message, "where", "memory");
  }
  if (spec.where !== undefined && (ctx.stage === "where" || (ctx.stage === "rows" && !/^IO Error/.test(message)))) {
    const mismatch = typeMismatch(message, spec.where, ctx.columns ?? []);
    if (mismatch) return mismatch;
    const said = ctx.clientSql
      ? clientWhereError(message, spec.where)
      : new DatasetError(`where: ${firstLine(message)}`, undefined, "where");
    return withQuotesHint(said, spec.where);
  }
  const named = /file ['"]([^'"]+)['"]/.exec(message)?.[1] ?? file;
  return new DatasetError(`${named}: ${firstLine(message)}`);
}

/** A client's `where` error: its kind, and DuckDB's sentence only when every part it quotes is the client's own. */
function clientWhereError(message: string, where: string): DatasetError {
  const kind = /^([A-Za-z ]+ Error): /.exec(message)?.[1];
  const said = firstLine(message);
  for (const { re, say } of TOLD_BACK) {
    const m = re.exec(said);
    if (kind && m?.slice(1).every((part) => where.includes(part)))
      return new DatasetError(`where: ${kind}: ${say ? say(m) : m[0]}`, message, "where");
  }
  const why = [kind ? KINDS[kind] : undefined, "the server's log has DuckDB's whole message"].filter(Boolean).join("; ");
  return new DatasetError(`where: ${kind ?? "DuckDB refused it"} (${why})`, message, "where");
}

/** DuckDB's names for a type as its errors spell them, as DESCRIBE does. */
const TYPE_NAMES: Record<string, string> = {
  INTEGER_LITERAL: "INTEGER",
  STRING_LITERAL: "VARCHAR",
  INT64: "BIGINT",
  INT32: "INTEGER",
  INT16: "SMALLINT",
  INT8: "TINYINT",
  DECIMAL_LITERAL: "DECIMAL",
};
const typeName = (t: string) => TYPE_NAMES[t] ?? t;
const TYPE_NAME =
  /^(U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?(_LITERAL)?|U?INT\d+|DOUBLE|FLOAT|REAL|DECIMAL(_LITERAL)?|NUMERIC|DATE|TIME(STAMP)?(_\w+)?|TIMESTAMPTZ|BOOLEAN|BOOL|INTERVAL|UUID|BLOB|VARCHAR|STRING_LITERAL|JSON|BIT)$/;

/** The type in "Could not convert string '<value>' to <type>": the last type name before DuckDB's quote of the query. */
function convertedTo(message: string): string[] | undefined {
  if (!/Could not convert string '/.test(message)) return undefined;
  const sentence = message.split(/\n\s*LINE \d+:/)[0];
  const types = [...sentence.matchAll(/' to ([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]).filter((t) => TYPE_NAME.test(t));
  return types.length > 0 ? [sentence, types[types.length - 1]] : undefined;
}

/**
 * A where that compares or converts mismatched types (a DATE column with a number), said with the types and which of
 * the where's columns has which: DuckDB's sentence names the types only. Types hold no value of the data's.
 */
function typeMismatch(message: string, where: string, columns: ReadonlyArray<{ name: string; type: string }>): DatasetError | undefined {
  const said = firstLine(message);
  const compared = /Cannot compare values of type (\S+) and type (\S+)/.exec(said);
  const cast = /Unimplemented type for cast \((\S+) -> (\S+)\)/.exec(said);
  // The string DuckDB quotes is a value of the rows, which may hold newlines: the type is read past it, from the whole text.
  const text = convertedTo(message) ?? /^invalid (date|timestamp) field format/.exec(said);
  const pair = compared ?? cast ?? text;
  if (!pair) return undefined;
  // Only a type's name is told: a quoted value that imitates DuckDB's sentence yields no word of its own.
  const types = pair.slice(1).map((t) => (TYPE_NAME.test(t.toUpperCase()) ? typeName(t.toUpperCase()) : "the type asked for"));
  const esc = (t: string) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const used = columns.filter((c) => new RegExp(`(^|[^\\w"])${esc(c.name)}($|[^\\w"])|"${esc(c.name.replaceAll('"', '""'))}"`).test(where));
  const named = used.filter((c) => types.some((t) => c.type.startsWith(t)));
  const shown = (named.length > 0 ? named : used).map((c) => `'${c.name}' is ${c.type}`).join(", ");
  const what = compared
    ? `it compares ${types[0]} with ${types[1]}`
    : cast
      ? `it casts ${types[0]} to ${types[1]}`
      : `a text could not be read as ${types[0]}`;
  const kind = /^([A-Za-z ]+ Error): /.exec(message)?.[1] ?? "Binder Error";
  return new DatasetError(
    `where: ${kind}: ${what}${shown ? ` (${shown})` : ""}: compare like with like, casting one side (CAST(<column> AS <type>), or a date written DATE '2024-01-31')`,
    message,
    "where",
  );
}

/** `lang = "en"` names a column `en`: the error says how text is written, SQL's way and not JSON's. */
function withQuotesHint(err: DatasetError, where: string): DatasetError {
  const name = /Referenced column "([^"]+)" not found/.exec(err.message)?.[1];
  if (name === undefined || !where.includes(`"${name}"`)) return err;
  return new DatasetError(`${err.message} ("${name}" names a column; text is written in single quotes: '${name}')`, err.detail, err.field);
}

/** DuckDB's first line, without its `<Kind> Error: ` prefix. */
export function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text
    .split("\n")[0]
    .replace(/^[A-Za-z ]+ Error: /, "")
    .trim();
}
