// The table port: a dataset read row by row in its order, and a table written as the input's columns beside the
// job's result columns. Only the adapter (duckdb-tables.ts) knows a file format or a query language.
import type { Row } from "./template.js";

/** A problem with a dataset: one line naming the file and, where known, the row and the column. */
export class DatasetError extends Error {
  constructor(
    message: string,
    /** What the message leaves out (a client's SQL error's whole text): for the log, never for the client. */
    readonly detail?: string,
    /** The job's field at fault (`where`), where one is. */
    readonly field?: string,
    /** The read was stopped at a limit of its memory or its time, not refused for what it is. */
    readonly bound?: "memory" | "time",
  ) {
    super(message);
    this.name = "DatasetError";
  }
}

/** The types a job's own columns take; each format stores them as its own (a vector is list<float32> in Parquet). */
export type ColumnType = "string" | "integer" | "number" | "boolean" | "vector" | "json" | "string[]" | "integer[]" | "number[]";

export interface Column {
  name: string;
  /** The input's own type name for an input column (shown by --dry-run), a ColumnType for a result column. */
  type: string;
}

export interface InputSpec {
  /** A file, a folder of parts, or a glob. */
  input: string;
  /** A row filter in the adapter's expression language (SQL for DuckDB). */
  where?: string;
  limit?: number;
}

export interface TableInput {
  /** The files read, in order; one format. */
  readonly files: readonly string[];
  readonly columns: readonly Column[];
  /** Rows after `where` and `limit`, in input order, a chunk at a time; the same order every time it is called. */
  rows(): AsyncIterable<Row[]>;
  /** How many rows `rows()` yields. */
  count(): Promise<number>;
}

export interface WriteSpec {
  /** The input columns carried over, in order. */
  keep: readonly string[];
  /** A JSONL file of one object per input row, in input order, holding `columns`. */
  results: string;
  /**
   * `results` is instead an output this job wrote earlier (any output format), holding `columns` by their `name`s:
   * another format of the same answers is written without running anything again.
   */
  resultsTable?: boolean;
  /** The result columns by their names in `results`, each written under `as` where given. */
  columns: ReadonlyArray<{ name: string; type: ColumnType; as?: string }>;
  /** .parquet, .csv, .tsv, .jsonl or .ndjson; written under a temporary name and renamed when complete. */
  output: string;
}

export interface Tables {
  open(spec: InputSpec): Promise<TableInput>;
  /** Writes `input`'s kept columns beside the results; returns the rows written. */
  write(input: TableInput, spec: WriteSpec): Promise<number>;
  /** The columns `write` would write, each with its type as the output's format holds it (in the adapter's type names). */
  outputTypes(input: TableInput, spec: Omit<WriteSpec, "results">): Column[];
  close(): Promise<void>;
}

export const INPUT_FORMATS = [".parquet", ".csv", ".tsv", ".jsonl", ".ndjson", ".json", ".arrow"] as const;
export const OUTPUT_FORMATS = [".parquet", ".csv", ".tsv", ".jsonl", ".ndjson"] as const;
