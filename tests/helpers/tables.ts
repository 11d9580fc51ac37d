// Tables for the dataset tests, made and read by DuckDB itself, as a user's tools would: a query's rows written as
// Parquet, and any table read back with its column types (64-bit integers as numbers where exact, else their digits).
import { DuckDBInstance } from "@duckdb/node-api";

async function withDuck<T>(run: (c: Awaited<ReturnType<DuckDBInstance["connect"]>>) => Promise<T>): Promise<T> {
  const db = await DuckDBInstance.create(":memory:");
  const c = await db.connect();
  try {
    return await run(c);
  } finally {
    c.closeSync();
    db.closeSync();
  }
}

/** Writes the rows of `sql` to `file` as Parquet; returns `file`. */
export const parquetFrom = (sql: string, file: string): Promise<string> =>
  withDuck(async (c) => {
    await c.run(`COPY (${sql}) TO '${file}' (FORMAT parquet)`);
    return file;
  });

/** A table file (any format DuckDB reads by its name) with its column types and rows. */
export const readTable = (file: string): Promise<{ types: Record<string, string>; rows: Record<string, any>[] }> =>
  withDuck(async (c) => {
    const r = await c.runAndReadAll(`SELECT * FROM '${file}'`);
    const types = Object.fromEntries(r.columnNames().map((n, i) => [n, String(r.columnTypes()[i])]));
    const rows = JSON.parse(
      JSON.stringify(r.getRowObjectsJS(), (_k, v) =>
        typeof v === "bigint" ? (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()) : v,
      ),
    );
    return { types, rows };
  });

/** The rows of `sql` run by DuckDB alone (no adapter): what DuckDB itself says, for a test to hold the adapter to. */
export const duckRows = (sql: string): Promise<Record<string, unknown>[]> =>
  withDuck(async (c) => (await c.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[]);
