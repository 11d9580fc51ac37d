// The table port's contract, run against every adapter (DuckDB today): each input format read in order with its
// types, where and limit, the output written in each format with a type round trip, and every bad input refused
// with one line naming the file (and the row, where the format has one) and no output left behind.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { Field, Float64, Int32, Int64, List, Table, tableToIPC, Utf8, vectorFromArray } from "apache-arrow";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDuckTables } from "../../datasets/duckdb-tables.js";
import { DatasetError, type Tables } from "../../datasets/tables.js";
import type { Row } from "../../datasets/template.js";
import { jsonl, scratchDir } from "../helpers/scratch.js";
import { parquetFrom } from "../helpers/tables.js";

const scratch = scratchDir("tables");
const ADAPTERS: Array<[string, (tempDir: string) => Promise<Tables>]> = [["duckdb", (tempDir) => openDuckTables({ tempDir })]];

/** A typed table written by DuckDB itself, as a user's Parquet file would be. */
const parquetOf = async (selectSql: string) => parquetFrom(selectSql, await scratch.file("in.parquet"));

const TYPED = `SELECT i AS id, 'line ' || i || E'\\n"quoted", comma' AS txt, i * 1.5 AS score,
  CASE WHEN i % 2 = 0 THEN NULL ELSE i END AS maybe, [i, i + 1] AS pair FROM range(3) t(i)`;

async function all(tables: Tables, spec: Parameters<Tables["open"]>[0]): Promise<Row[]> {
  const input = await tables.open(spec);
  const out: Row[] = [];
  for await (const chunk of input.rows()) out.push(...chunk);
  return out;
}

async function refused(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e) => e,
  );
  expect(err).toBeInstanceOf(DatasetError);
  expect((err as Error).message).not.toContain("\n");
  return (err as Error).message;
}

describe.each(ADAPTERS)("the table port over %s", (_name, make) => {
  let tables: Tables;
  let dir: string;
  beforeAll(async () => {
    dir = path.dirname(await scratch.file());
    await mkdir(dir, { recursive: true });
    tables = await make(dir);
  });
  afterAll(() => tables.close());

  it("reads Parquet with its types: integers, floats, nulls, lists, text with newlines and quotes", async () => {
    const rows = await all(tables, { input: await parquetOf(TYPED) });
    expect(rows).toEqual([
      { id: 0, txt: 'line 0\n"quoted", comma', score: 0, maybe: null, pair: [0, 1] },
      { id: 1, txt: 'line 1\n"quoted", comma', score: 1.5, maybe: 1, pair: [1, 2] },
      { id: 2, txt: 'line 2\n"quoted", comma', score: 3, maybe: null, pair: [2, 3] },
    ]);
  });

  it("reads CSV and TSV with quoted newlines and typed columns, and JSON rows in either form", async () => {
    const csv = await scratch.write('id,txt,score\n1,"a ""b""\nc",0.5\n2,,2\n', "in.csv");
    expect(await all(tables, { input: csv })).toEqual([
      { id: 1, txt: 'a "b"\nc', score: 0.5 },
      { id: 2, txt: null, score: 2 },
    ]);
    const tsv = await scratch.write("id\ttxt\n1\tx, y\n", "in.tsv");
    expect(await all(tables, { input: tsv })).toEqual([{ id: 1, txt: "x, y" }]);
    const rows = [
      { id: 1, tags: ["a", "b"], meta: { k: 1 } },
      { id: 2, tags: [], meta: null },
    ];
    expect(await all(tables, { input: await scratch.write(jsonl(rows), "in.jsonl") })).toEqual(rows);
    expect(await all(tables, { input: await scratch.write(jsonl(rows), "in.ndjson") })).toEqual(rows);
    expect(await all(tables, { input: await scratch.write(JSON.stringify(rows), "in.json") })).toEqual(rows);
  });

  it("reads JSON rows nested thousands deep: past a request body's depth a value is JSON text, not walked on", async () => {
    const deep = `${'{"a":'.repeat(3_000)}1${"}".repeat(3_000)}`;
    const input = await scratch.write(`{"id":1,"deep":${deep}}\n`, "deep.jsonl");
    const [row] = await all(tables, { input });
    expect(row.id).toBe(1);
    // 63 levels of structs under the row, then the rest as JSON text.
    let v: any = row.deep;
    for (let i = 0; i < 63; i++) v = v.a;
    expect(typeof v).toBe("string");
    expect(v.startsWith('{"a":')).toBe(true);
  });

  it("keeps a quoted empty string apart from a missing value, read from CSV and TSV and through every output format", async () => {
    const csv = await scratch.write('id,t,n,b\n1,"","",""\n2,,,true\n3,x,"",\n', "empty.csv");
    const tsv = await scratch.write('id\tt\n1\t""\n2\t\n3\tx\n', "empty.tsv");
    // In a column of booleans (or numbers, or dates) "" can only be a missing value.
    const expected = [
      { id: 1, t: "", n: "", b: null },
      { id: 2, t: null, n: null, b: true },
      { id: 3, t: "x", n: "", b: null },
    ];
    expect(await all(tables, { input: csv })).toEqual(expected);
    expect(await all(tables, { input: tsv })).toEqual(expected.map(({ t, id }) => ({ id, t })));
    expect(await all(tables, { input: csv, where: "t = ''" })).toEqual([expected[0]]);
    const input = await tables.open({ input: csv });
    const results = await scratch.write(jsonl([{ text: "" }, { text: null }, { text: "y" }]));
    for (const ext of [".parquet", ".csv", ".tsv", ".jsonl"]) {
      const output = path.join(dir, `empty-out${ext}`);
      await tables.write(input, { keep: ["id", "t", "n", "b"], results, columns: [{ name: "text", type: "string" }], output });
      expect(await all(tables, { input: output }), ext).toEqual([
        { ...expected[0], text: "" },
        { ...expected[1], text: null },
        { ...expected[2], text: "y" },
      ]);
    }
  });

  it("reads Arrow IPC (the Hugging Face datasets cache) in stream and file form, with its types", async () => {
    const table = new Table({
      id: vectorFromArray([1n, 2n], new Int64()),
      text: vectorFromArray(['a\n"b"', "c"], new Utf8()),
      score: vectorFromArray([0.5, 1.5], new Float64()),
      tags: vectorFromArray([["x", "y"], []], new List(new Field("item", new Utf8(), true))),
      n: vectorFromArray([null, 3], new Int32()),
    });
    const expected = [
      { id: 1, text: 'a\n"b"', score: 0.5, tags: ["x", "y"], n: null },
      { id: 2, text: "c", score: 1.5, tags: [], n: 3 },
    ];
    for (const form of ["stream", "file"] as const) {
      const file = await scratch.write(Buffer.from(tableToIPC(table, form)), "data-00000-of-00001.arrow");
      const input = await tables.open({ input: file, where: "score > 0" });
      expect(input.columns.map((c) => `${c.name}:${c.type}`)).toEqual([
        "id:BIGINT",
        "text:VARCHAR",
        "score:DOUBLE",
        "tags:VARCHAR[]",
        "n:BIGINT",
      ]);
      expect(await all(tables, { input: file })).toEqual(expected);
    }
    expect(await refused(tables.open({ input: await scratch.write("not arrow", "bad.arrow") }))).toMatch(
      /bad\.arrow: not an Arrow IPC file/,
    );
  });

  it("reads a folder or a glob of parts in name order, and filters and limits in input order across chunks", async () => {
    const parts = path.join(dir, "parts");
    await mkdir(parts, { recursive: true });
    await writeFile(path.join(parts, "b.csv"), "n\n3\n4\n");
    await writeFile(path.join(parts, "a.csv"), "n\n1\n2\n");
    await writeFile(path.join(parts, "notes.txt"), "not a part");
    expect((await all(tables, { input: parts })).map((r) => r.n)).toEqual([1, 2, 3, 4]);
    expect((await all(tables, { input: path.join(parts, "*.csv"), where: "n % 2 = 0" })).map((r) => r.n)).toEqual([2, 4]);
    const big = await parquetOf("SELECT i AS n FROM range(10000) t(i)");
    const input = await tables.open({ input: big, where: "n % 3 = 0", limit: 3000 });
    expect(await input.count()).toBe(3000);
    const seen: number[] = [];
    for await (const chunk of input.rows()) seen.push(...chunk.map((r) => r.n as number));
    expect(seen).toEqual(Array.from({ length: 3000 }, (_, i) => i * 3));
  });

  it("writes the kept columns beside the results, in each format, by rename, with the types kept", async () => {
    const input = await tables.open({ input: await parquetOf(TYPED) });
    const results = await scratch.write(
      jsonl([
        { text: "x", embedding: [0.5, 0.25], error_code: null },
        { text: null, embedding: null, error_code: "boom" },
        { text: "z", embedding: [1, 2], error_code: null },
      ]),
    );
    const columns = [
      { name: "text", type: "string" as const },
      { name: "embedding", type: "vector" as const },
      { name: "error_code", type: "string" as const },
    ];
    const keep = ["id", "txt", "pair", "maybe"];
    const parquet = path.join(dir, "out.parquet");
    expect(await tables.write(input, { keep, results, columns, output: parquet })).toBe(3);
    const back = await tables.open({ input: parquet });
    expect(back.columns.map((c) => `${c.name}:${c.type}`)).toEqual([
      "id:BIGINT",
      "txt:VARCHAR",
      "pair:BIGINT[]",
      "maybe:BIGINT",
      "text:VARCHAR",
      "embedding:FLOAT[]",
      "error_code:VARCHAR",
    ]);
    expect((await all(tables, { input: parquet }))[1]).toEqual({
      id: 1,
      txt: 'line 1\n"quoted", comma',
      pair: [1, 2],
      maybe: 1,
      text: null,
      embedding: null,
      error_code: "boom",
    });
    const jsonlOut = path.join(dir, "out.jsonl");
    await tables.write(input, { keep, results, columns, output: jsonlOut });
    expect(JSON.parse(readFileSync(jsonlOut, "utf8").split("\n")[0])).toEqual({
      id: 0,
      txt: 'line 0\n"quoted", comma',
      pair: [0, 1],
      maybe: null,
      text: "x",
      embedding: [0.5, 0.25],
      error_code: null,
    });
    const csvOut = path.join(dir, "out.csv");
    await tables.write(input, { keep, results, columns, output: csvOut });
    // Lists become JSON text in CSV; the text with its newline and quotes reads back whole.
    expect((await all(tables, { input: csvOut }))[0]).toEqual({
      id: 0,
      txt: 'line 0\n"quoted", comma',
      pair: "[0,1]",
      maybe: null,
      text: "x",
      embedding: "[0.5,0.25]",
      error_code: null,
    });
    expect(readdirSync(dir).filter((f) => f.includes(".tmp-"))).toEqual([]);
  });

  it("writes another format from an earlier output's result columns, in any format, with their types", async () => {
    const input = await tables.open({ input: await parquetOf(TYPED) });
    const results = await scratch.write(
      jsonl([
        { text: "", embedding: [0.5, 0.25], calls: { f: 1 }, n: 7, error_code: null },
        { text: null, embedding: null, calls: null, n: null, error_code: "boom" },
        { text: "007", embedding: [1, 2], calls: [1, "a"], n: 4503599627370496, error_code: null },
      ]),
    );
    const columns = [
      { name: "text", type: "string" as const },
      { name: "embedding", type: "vector" as const },
      { name: "calls", type: "json" as const },
      { name: "n", type: "integer" as const },
      { name: "error_code", type: "string" as const },
    ];
    const renamed = columns.map((c) => ({ ...c, as: `result_${c.name}` }));
    const expected = await (async () => {
      const out = path.join(dir, "first.parquet");
      await tables.write(input, { keep: ["id"], results, columns, output: out });
      return all(tables, { input: out });
    })();
    for (const ext of [".csv", ".tsv", ".jsonl", ".parquet"]) {
      const earlier = path.join(dir, `earlier${ext}`);
      await tables.write(input, { keep: ["id", "txt"], results, columns: renamed, output: earlier });
      const again = path.join(dir, `again-from${ext.replace(".", "-")}.parquet`);
      const from = renamed.map((c) => ({ name: c.as, type: c.type, as: c.name }));
      expect(await tables.write(input, { keep: ["id"], results: earlier, resultsTable: true, columns: from, output: again })).toBe(3);
      const back = await tables.open({ input: again });
      expect(
        back.columns.map((c) => `${c.name}:${c.type}`),
        ext,
      ).toEqual(["id:BIGINT", "text:VARCHAR", "embedding:FLOAT[]", "calls:JSON", "n:BIGINT", "error_code:VARCHAR"]);
      expect(await all(tables, { input: again }), ext).toEqual(expected);
    }
  });

  it("reads a .csv whose fields are separated by semicolons or bars (DuckDB's sniffer tells which) as its columns", async () => {
    const semi = await scratch.write('id;lang;review_text\n1;en;"Great, really"\n2;de;Gut\n', "semi.csv");
    expect(await all(tables, { input: semi })).toEqual([
      { id: 1, lang: "en", review_text: "Great, really" },
      { id: 2, lang: "de", review_text: "Gut" },
    ]);
    const bars = await scratch.write("id|text\n1|a\n2|b\n", "bars.csv");
    expect(await all(tables, { input: bars })).toEqual([
      { id: 1, text: "a" },
      { id: 2, text: "b" },
    ]);
    // A one-column CSV stays one column.
    const one = await scratch.write("text\nhello there\nbye\n", "one.csv");
    expect(await all(tables, { input: one })).toEqual([{ text: "hello there" }, { text: "bye" }]);
  });

  it("refuses bad input with one line naming the file, and the row where the format has one", async () => {
    const good = await parquetOf(TYPED);
    const truncated = await scratch.write(readFileSync(good).subarray(0, 200), "cut.parquet");
    expect(await refused(tables.open({ input: truncated }))).toMatch(/cut\.parquet: .*magic bytes/);
    expect(await refused(tables.open({ input: await scratch.write("not parquet at all", "junk.parquet") }))).toMatch(/junk\.parquet/);
    expect(await refused(tables.open({ input: await scratch.write("", "empty.csv") }))).toMatch(/empty\.csv: empty file/);
    const ragged = await scratch.write("a,b,c\n1,2,3\n4,5\n", "ragged.csv");
    expect(await refused(all(tables, { input: ragged }))).toMatch(/ragged\.csv: row 2: Expected Number of Columns: 3 Found: 2/);
    const latin = await scratch.write(Buffer.from("a,b\n1,caf\xe9\n", "latin1"), "latin.csv");
    expect(await refused(all(tables, { input: latin }))).toMatch(/latin\.csv: row 1: .*not utf-8/);
    const badJson = await scratch.write('{"a":1}\n{"a": x}\n', "bad.jsonl");
    expect(await refused(all(tables, { input: badJson }))).toMatch(/bad\.jsonl: row 2: malformed JSON \(unexpected character\)$/);
    expect(await refused(tables.open({ input: path.join(dir, "missing.parquet") }))).toMatch(/missing\.parquet: no such file/);
    expect(await refused(tables.open({ input: await scratch.write("x", "data.xlsx") }))).toMatch(/unknown input format '\.xlsx'/);
    expect(await refused(tables.open({ input: path.join(dir, "nothing-*.csv") }))).toMatch(/no file matches/);
    expect(await refused(tables.open({ input: good, where: "nope = 1" }))).toMatch(/^where: .*nope/);
    expect(await refused(tables.open({ input: good, where: 'txt = "x"' }))).toMatch(
      /^where: Referenced column "x" not found in FROM clause! \("x" names a column; text is written in single quotes: 'x'\)$/,
    );
  });

  it("leaves no output when a write fails", async () => {
    const input = await tables.open({ input: await parquetOf(TYPED) });
    const results = await scratch.write(jsonl([{ n: "not a number" }, { n: 1 }, { n: 2 }]));
    const output = path.join(dir, "failed.parquet");
    await refused(tables.write(input, { keep: ["id"], results, columns: [{ name: "n", type: "integer" }], output }));
    expect(existsSync(output)).toBe(false);
    expect(readdirSync(dir).filter((f) => f.startsWith("failed.parquet"))).toEqual([]);
  });
});

describe("a step limit (a server's, over its clients' where)", () => {
  it("interrupts a read or a write whose step runs past it, naming the where and the limit; a quick read is untouched", async () => {
    const dir = path.dirname(await scratch.file());
    const steps: boolean[] = [];
    const tables = await openDuckTables({
      tempDir: dir,
      confine: true,
      // Long enough for the quick read at the end on a machine loaded by the whole suite (300 ms was not).
      stepLimitMs: 1_500,
      onStep: (running) => steps.push(running),
      limitNames: { time: "DATASET_STEP_SECONDS" },
    });
    try {
      const input = await parquetOf("SELECT i AS n FROM range(200000) t(i)");
      expect(await (await tables.open({ input })).count()).toBe(200_000);
      const started = Date.now();
      // DuckDB stops between chunks of rows, not inside one function call: a little work a row, on many rows.
      const costly = "levenshtein(repeat(n::VARCHAR, 40), repeat('x', 100)) < 0";
      const said =
        /^where: it took longer than 1\.5 s, the most one step of a dataset read may take here \(DATASET_STEP_SECONDS\), so it was stopped \(a costly where\?\)$/;
      expect(await refused(all(tables, { input, where: costly }))).toMatch(said);
      // Writing the table reads the where again, in one statement: a step as bounded as the reads.
      const kept = await tables.open({ input, where: `${costly} OR n < 3` });
      const results = await scratch.write(jsonl([{ r: 1 }, { r: 2 }, { r: 3 }]), "results.jsonl");
      const output = path.join(dir, "costly.parquet");
      expect(await refused(tables.write(kept, { keep: ["n"], results, columns: [{ name: "r", type: "integer" }], output }))).toMatch(said);
      expect(existsSync(output)).toBe(false);
      expect(Date.now() - started).toBeLessThan(20_000);
      // A watcher outside sees each step start and end, none left running.
      expect(steps.length).toBeGreaterThan(4);
      expect(steps.filter((running) => running).length).toBe(steps.filter((running) => !running).length);
      // The connection is still good for the next job.
      expect((await all(tables, { input, where: "n < 3" })).map((r) => r.n)).toEqual([0, 1, 2]);
    } finally {
      await tables.close();
    }
  });
});

describe("a client's where (a server's confined reads)", () => {
  it("names the clause and the kind of error, never a value the server holds; the whole text is the error's detail", async () => {
    const dir = path.dirname(await scratch.file());
    const tables = await openDuckTables({ tempDir: dir, confine: true, stepLimitMs: 10_000 });
    try {
      // A where reads the row alone (where.unit.test.ts), so the values DuckDB's errors quote are the dataset's: a
      // stand-in here for anything a client did not write itself.
      const secret = "s3cr3t-value";
      const input = await scratch.write(`id,t\n1,${secret}\n2,a\n`, "client.csv");
      const probes: Array<[string, RegExp]> = [
        ["regexp_matches('x', t || '(')", /^where: Invalid Input Error/],
        ["strptime(t, '%Y') IS NULL", /^where: Invalid Input Error/],
      ];
      for (const [where, message] of probes) {
        const err = await all(tables, { input, where }).then(
          () => undefined,
          (e) => e as DatasetError,
        );
        expect(err, where).toBeInstanceOf(DatasetError);
        expect(err!.message, where).toMatch(message);
        expect(err!.message, where).toMatch(/the server's log has DuckDB's whole message\)$/);
        expect(err!.message, where).not.toContain(secret);
        expect(err!.field, where).toBe("where");
        expect(err!.detail, where).toContain(secret);
      }
      // A mismatched type is said by the types and the where's columns, with no value the rows hold.
      const cast = await all(tables, { input, where: "t::INT = 1" }).then(
        () => undefined,
        (e) => e as DatasetError,
      );
      expect(cast?.message).toMatch(/^where: Conversion Error: a text could not be read as INTEGER \('t' is VARCHAR\): /);
      expect(cast?.message).not.toContain(secret);
      // A value over lines, that imitates DuckDB's sentence, is no more told.
      const lines = await scratch.write(`id,t\n1,"x' to SECRET\nwith a newline"\n`, "lines.csv");
      const imitated = await all(tables, { input: lines, where: "t::INT = 1" }).then(
        () => undefined,
        (e) => e as DatasetError,
      );
      expect(imitated?.message).toMatch(/^where: Conversion Error: a text could not be read as INTEGER \('t' is VARCHAR\): /);
      expect(imitated?.message).not.toMatch(/SECRET|newline/);
      expect(cast?.detail).toContain(secret);
      // What the client wrote itself is named back: its own column, function, quote or file.
      const own: Array<[string, RegExp]> = [
        ["nope = 1", /^where: Binder Error: Referenced column "nope" not found in FROM clause!/],
        [
          't = "a"',
          /^where: Binder Error: Referenced column "a" not found in FROM clause! \("a" names a column; text is written in single quotes: 'a'\)$/,
        ],
        ["t = 'a", /^where: Parser Error: unterminated quoted string at or near "'a"$/],
        ["lower(t, 1) = 'a'", /^where: Binder Error \(a name it uses is not a column/],
      ];
      for (const [where, message] of own) expect(await refused(all(tables, { input, where })), where).toMatch(message);
      expect((await all(tables, { input, where: "t = 'a'" })).map((r) => r.id)).toEqual([2]);
    } finally {
      await tables.close();
    }
  });

  it("stops a where that spills more than its scratch limit to disk, naming the limit, and leaves no spill behind", async () => {
    const dir = path.join(path.dirname(await scratch.file()), "spill");
    await mkdir(dir, { recursive: true });
    // DuckDB takes 15-20 s of a core to reach the limit (no cheaper where found that it bounds); a loaded machine
    // takes several times that, which neither the step limit nor the test's time may cut short.
    const tables = await openDuckTables({ tempDir: dir, confine: true, stepLimitMs: 170_000, memoryLimit: "64MB", maxTempBytes: 4 << 20 });
    try {
      const input = path.join(dir, "one.csv");
      await writeFile(input, "id\n1\n");
      // Sorting a list of three million numbers spills past 64 MB of memory.
      const sorted = "len(list_sort(range(3000000))) > 0";
      expect(await refused(all(tables, { input, where: sorted }))).toMatch(
        /^where: it needed more memory or scratch disk than one dataset read may take here, so it was stopped \(a costly where\?\)/,
      );
      const spilled = readdirSync(dir).map((f) => statSync(path.join(dir, f)).blocks * 512);
      expect(spilled.reduce((a, b) => a + b, 0)).toBeLessThan(8 << 20);
      expect((await all(tables, { input })).map((r) => r.id)).toEqual([1]);
    } finally {
      await tables.close();
    }
  }, 180_000);
});
