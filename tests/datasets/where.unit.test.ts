// A `where` is one condition over the row's own values, checked on DuckDB's own parse before it runs: what users
// write keeps working (comparisons, LIKE, lists, dates, CASE, casts, hash sampling) on the runner's tables and a
// server's confined ones, and every way of reading the server's state or another value each read (a setting, the
// version, the environment, a subquery, a table function, the clock, randomness) is refused by name, however written.
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDuckTables } from "../../datasets/duckdb-tables.js";
import { VALUE_KEYWORDS } from "../../datasets/duckdb-where.js";
import { DatasetError, type Tables } from "../../datasets/tables.js";
import { scratchDir } from "../helpers/scratch.js";
import { duckRows, parquetFrom } from "../helpers/tables.js";

const scratch = scratchDir("where");
let dir: string;
/** The runner's tables (the user's own machine) and a server's (confined to its scratch folder, each step bounded). */
let runner: Tables;
let server: Tables;
let reviews: string;

const REVIEWS = `SELECT * FROM (VALUES
  (1, 'en', 'Great phone', ['a', 'b'], {'k': 1}, DATE '2024-01-15', TIMESTAMP '2024-01-15 10:30:00', 4.5, NULL::VARCHAR),
  (2, 'de', 'Gut', ['c'], {'k': 2}, DATE '2024-03-01', TIMESTAMP '2024-03-01 08:00:00', 2.0, 'x'),
  (3, 'en', 'bad battery', [], {'k': 3}, DATE '2023-12-31', TIMESTAMP '2023-12-31 23:59:00', NULL, NULL)
) t(id, lang, review, tags, meta, day, seen_at, score, note)`;

beforeAll(async () => {
  dir = path.dirname(await scratch.file());
  await mkdir(dir, { recursive: true });
  reviews = await parquetFrom(REVIEWS, await scratch.file("reviews.parquet"));
  runner = await openDuckTables({ tempDir: dir });
  server = await openDuckTables({ tempDir: dir, confine: true, stepLimitMs: 10_000 });
});
afterAll(async () => {
  await runner?.close();
  await server?.close();
});

async function ids(tables: Tables, where: string, input = reviews): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const chunk of (await tables.open({ input, where })).rows()) out.push(...chunk.map((r) => r.id));
  return out;
}

async function refusal(tables: Tables, where: string): Promise<DatasetError> {
  const err = await ids(tables, where).then(
    () => undefined,
    (e) => e,
  );
  expect(err, where).toBeInstanceOf(DatasetError);
  return err as DatasetError;
}

const CHANGES =
  "gives another value each time the table is read, and the answers are joined back to the rows by their place: filter on the rows' own values (to sample, hash(<column>) % 10 = 0)";
const STATE =
  "reads state beyond the row (a setting, the environment, the version, the catalog), which a where may not: filter on the rows' own values";
const BEYOND = "reads beyond the row (a table, a file, DuckDB's catalog), which a where may not: filter on the rows' own values";
const NOT_TAKEN = "is not taken in a where, which is one condition over each row's own columns";
const reEscape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

describe("a where: one condition over the row's own values", () => {
  it("keeps what users write: comparisons, AND/OR/NOT, LIKE, regexps, lists, structs, dates, CASE, casts, hash sampling", async () => {
    const usual: Array<[string, number[]]> = [
      ["lang = 'en'", [1, 3]],
      ["lang = 'en' AND NOT score IS NULL", [1]],
      ["score > 3 OR note IS NOT NULL", [1, 2]],
      ["review ILIKE '%BATTERY%'", [3]],
      ["review LIKE 'G%' AND review NOT LIKE '%phone'", [2]],
      ["regexp_matches(review, '^[A-Z]')", [1, 2]],
      ["length(review) > 3 AND upper(lang) = 'EN' AND trim(review) = review", [1, 3]],
      ["starts_with(review, 'bad') OR contains(review, 'phone')", [1, 3]],
      ["list_contains(tags, 'a')", [1]],
      ["lang = ANY(['en', 'fr']) AND 'a' = ANY(tags)", [1]],
      ["'c' <> ALL(tags)", [1, 3]],
      ["len(tags) = 0", [3]],
      ["tags[1] = 'c'", [2]],
      ["list_filter(tags, x -> x > 'a') = ['b']", [1]],
      ["len(list_transform(tags, lambda t: upper(t))) = 1", [2]],
      ["meta.k >= 2", [2, 3]],
      ["day + INTERVAL 1 DAY > DATE '2024-01-15'", [1, 2]],
      ["date_diff('day', day, DATE '2024-03-01') < 60", [1, 2]],
      ["year(day) = 2024 AND month(day) = 1", [1]],
      ["strftime(seen_at, '%H') = '10' OR extract('hour' FROM seen_at) = 8", [1, 2]],
      ["hash(id) % 1 = 0", [1, 2, 3]],
      ["CASE WHEN lang = 'de' THEN score > 1 ELSE score > 4 END", [1, 2]],
      ["id::VARCHAR IN ('1', '3')", [1, 3]],
      ["CAST(score AS INTEGER) = 2 OR TRY_CAST(review AS INTEGER) IS NOT NULL", [2]],
      ["coalesce(note, 'none') = 'none'", [1, 3]],
      ["id BETWEEN 2 AND 3 AND id NOT IN (3)", [2]],
      ["sqrt(score) > 2 OR abs(round(score) - 2) < 0.5", [1, 2]],
      ["list_sum([id, 1]) > 2 AND split_part(review, ' ', 1) = 'bad'", [3]],
      ["nullif(lang, 'en') IS NULL", [1, 3]],
      ['"review" IS NOT NULL AND "Lang" <> \'xx\'', [1, 2, 3]],
      ["lang = 'en' -- English only", [1, 3]],
      ["/* the German one */ lang = 'de'", [2]],
      ["lang = 'en' /* ) OR (version() IS NOT NULL */", [1, 3]],
    ];
    for (const tables of [runner, server]) {
      for (const [where, expected] of usual) expect(await ids(tables, where), where).toEqual(expected);
    }
  });

  it("reads a column named like one of SQL's value functions (user, current_date) as the column", async () => {
    const input = await scratch.write("id,user,current_date\n1,ann,2024-01-01\n2,bob,2024-02-01\n", "named.csv");
    for (const tables of [runner, server]) {
      expect(await ids(tables, "user = 'ann'", input)).toEqual([1]);
      expect(await ids(tables, "current_date > DATE '2024-01-15'", input)).toEqual([2]);
    }
  });

  it("refuses each probe of the server's state by name, however it is written, and says nothing the server holds", async () => {
    const probes: Array<[string, string]> = [
      ["current_setting('temp_directory') LIKE '/srv%'", `current_setting() ${STATE}`],
      ["version() LIKE 'v1.5%'", `version() ${STATE}`],
      ["getenv('HOME') LIKE '/%'", "getenv() is none of DuckDB's scalar functions"],
      ["getvariable('x') IS NULL", `getvariable() ${STATE}`],
      ["current_catalog = 'memory'", `current_catalog ${STATE}`],
      ["pg_catalog.current_database() = 'memory'", `current_database() ${STATE}`],
      ["json_serialize_plan('SELECT 1') LIKE '%'", `json_serialize_plan() ${STATE}`],
      ["parse_path(review, 'system') = ['x']", `parse_path() with the 'system' separator ${STATE}`],
      ["(SELECT count(*) FROM duckdb_settings()) > 0", `a subquery (SELECT ..., EXISTS, IN (SELECT ...)) ${BEYOND}`],
      ["EXISTS (SELECT * FROM duckdb_extensions() WHERE loaded)", "a subquery"],
      ["id IN (SELECT database_oid FROM duckdb_databases())", "a subquery"],
      ["EXISTS (FROM glob('/etc/*'))", "a subquery"],
      ["lang = ANY(SELECT 'en')", "a subquery"],
      ["lang = ANY(SELECT unnest(['en']) FROM duckdb_settings())", "a subquery"],
      ["lang = ANY(SELECT unnest(['en']) WHERE version() IS NOT NULL)", "a subquery"],
      ["lang = ANY(list_filter(['en'], x -> version() <> ''))", "version()"],
      ["glob('/etc/*') IS NOT NULL", `glob() ${BEYOND}`],
      ["length(read_text('/etc/passwd')) > 0", `read_text() ${BEYOND}`],
      ["pg_get_viewdef(1) IS NULL", `pg_get_viewdef() ${BEYOND}`],
      // Disguises: quoted, spaced or commented names, other cases, schema-qualified, nested, inside a lambda or CASE.
      ["\"version\"() LIKE 'v%'", `version() ${STATE}`],
      ["VeRsIoN /* hidden */ () LIKE 'v%'", "version()"],
      ["version\n() LIKE 'v%'", "version()"],
      ["main.version() LIKE 'v%'", "version()"],
      ["system.main.current_setting('threads') = '1'", "current_setting()"],
      ["((((version())))) LIKE 'v%'", "version()"],
      ["CAST(current_setting('threads') AS INTEGER) = 1", "current_setting()"],
      ["id = 1 OR (lang = 'en' AND current_setting('home_directory') LIKE '/%')", "current_setting()"],
      ["CASE WHEN version() LIKE 'v1%' THEN true ELSE false END", "version()"],
      ["list_filter(tags, x -> version() LIKE 'v%') = tags", "version()"],
      ["(to_json(version()) -> '$') IS NOT NULL", "version()"],
      ["lang = 'en' -- a comment\n OR version() LIKE 'v%'", "version()"],
      ["typeof(current_setting('temp_directory')) = 'VARCHAR'", "current_setting()"],
      // Constructs beyond one condition over the row.
      ["COLUMNS(current_setting('temp_directory')) = 1", `COLUMNS(...) or * ${NOT_TAKEN}`],
      ["sum(id) > 0", `sum() ${NOT_TAKEN}`],
      ["row_number() OVER () = 1", "a window function (OVER ...)"],
      ["? = 1", "a parameter (?, $1)"],
      ["#1 = 1", "a positional reference (#1)"],
      ["1=1) UNION ALL (SELECT * FROM read_csv('/etc/passwd')", "anything past the condition"],
      ["1=1); SELECT (1", "anything past the condition"],
      ["1) GROUP BY (1", "anything past the condition"],
      ["1) WINDOW w AS (", "anything past the condition"],
    ];
    for (const [where, said] of probes) {
      const err = await refusal(server, where);
      expect(err.message, where).toMatch(new RegExp(`^where: ${reEscape(said)}`, "i"));
      expect(err.field, where).toBe("where");
      expect(err.message, where).not.toContain(dir);
      expect(err.message, where).not.toMatch(/v1\.\d/);
      // The runner refuses it just the same: the check is of the where, not of where it runs.
      expect((await refusal(runner, where)).message, where).toBe(err.message);
    }
    // A unicode escape DuckDB does not read is its parser's error, told by kind.
    expect((await refusal(server, `U&"\\0076ersion"() LIKE 'v%'`)).message).toMatch(/^where: Parser Error \(it is not valid SQL/);
  });

  it("refuses what gives another value each read (the clock, randomness), however written", async () => {
    const probes: Array<[string, string]> = [
      ["random() < 0.5", "random()"],
      ['"random"() < 0.5', "random()"],
      ["main.random() < 0.5", "random()"],
      ["RaNdOm/**/ () < 0.5", "random()"],
      ["id < 2 AND RANDOM () < 0.5", "random()"],
      ["uuid() IS NOT NULL OR gen_random_uuid() IS NULL", "uuid()"],
      ["epoch(now()) > 0", "now()"],
      ["today() > day", "today()"],
      ["current_date > DATE '2020-01-01'", "current_date"],
      ["current_timestamp > seen_at", "current_timestamp"],
      ["localtimestamp > seen_at", "localtimestamp"],
      ["list_transform([1], current_date -> 1) = [1]", "current_date"],
      ["current_localtimestamp() > seen_at", "current_localtimestamp()"],
      ["age(seen_at) > INTERVAL 1 DAY", "age() of one timestamp"],
      ["ago(INTERVAL 1 DAY) < seen_at", "ago()"],
      ["vector_type(id) = 'FLAT_VECTOR'", "vector_type()"],
      ["list_aggr([score], 'reservoir_quantile', 0.5) > 1", "list_aggr() of reservoir_quantile"],
    ];
    for (const [where, said] of probes) {
      expect((await refusal(runner, where)).message, where).toBe(`where: ${said} ${CHANGES}`);
    }
    // Two timestamps of the row: age() depends on them alone.
    expect(await ids(runner, "age(seen_at, TIMESTAMP '2024-01-01 00:00:00') > INTERVAL 30 DAY")).toEqual([2]);
    // Functions with effects or state are refused too (setseed, a sequence, error(), sleep_ms()).
    for (const where of ["setseed(0.5) IS NULL", "nextval('s') > 0", "error('x') IS NULL", "sleep_ms(1) IS NULL"])
      expect((await refusal(runner, where)).message, where).toMatch(new RegExp(`^where: \\w+\\(\\) ${reEscape(STATE)}$`));
  });

  it("refuses every function DuckDB marks as not consistent, and reads SQL's value functions as DuckDB's binder does", async () => {
    const unstable = await duckRows(
      "SELECT DISTINCT function_name AS name FROM duckdb_functions() WHERE function_type = 'scalar' AND stability <> 'CONSISTENT'",
    );
    expect(unstable.length).toBeGreaterThan(10);
    for (const { name } of unstable) {
      expect((await refusal(server, `"${name}"() IS NULL`)).message, String(name)).toMatch(
        new RegExp(`^where: ${reEscape(String(name))}\\(\\) (${reEscape(CHANGES)}|${reEscape(STATE)})$`),
      );
    }
    // Each of these names is a call where no column has it (DuckDB's binder); the check knows every one.
    for (const keyword of VALUE_KEYWORDS.keys()) {
      expect(await duckRows(`SELECT a FROM (SELECT 1 AS a) WHERE ${keyword} IS NOT NULL`), keyword).toEqual([{ a: 1 }]);
    }
    expect(await ids(server, "current_user = 'duckdb' AND lang = 'de'")).toEqual([2]);
  });

  it("reads a time with a zone in UTC on a server, whatever the server's own zone", async () => {
    // The zone is the process's (ICU reads it once), so this holds the setting; on a UTC machine it held before too.
    expect(await ids(server, "seen_at::TIMESTAMPTZ::VARCHAR LIKE '%+00' AND strftime(seen_at::TIMESTAMPTZ, '%z') = '+00'")).toEqual([
      1, 2, 3,
    ]);
  });

  it("keeps a subquery over another file out of the runner's where too: the job's hash covers its input alone", async () => {
    const other = await scratch.write("id\n1\n", "other.csv");
    expect((await refusal(runner, `id IN (SELECT id FROM '${other}')`)).message).toMatch(/^where: a subquery/);
    expect((await refusal(runner, `id IN (SELECT id FROM read_csv('${other}'))`)).message).toMatch(/^where: a subquery/);
  });

  it("says which of the where's columns has which type when it compares mismatched types, on both, naming no value", async () => {
    for (const tables of [runner, server]) {
      expect((await refusal(tables, "day > 5")).message).toBe(
        "where: Binder Error: it compares DATE with INTEGER ('day' is DATE): compare like with like, casting one side (CAST(<column> AS <type>), or a date written DATE '2024-01-31')",
      );
      expect((await refusal(tables, "id > day")).message).toMatch(
        /^where: Binder Error: it compares \w+ with DATE \('id' is \w+, 'day' is DATE\): /,
      );
      expect((await refusal(tables, "day = 20240115")).message).toMatch(/^where: \w+ Error: it casts INTEGER to DATE \('day' is DATE\): /);
      expect((await refusal(tables, "id = 'one'")).message).toMatch(
        /^where: Conversion Error: a text could not be read as \w+ \('id' is \w+\): /,
      );
      // A value of the data's that could not be converted is not quoted.
      const fromData = await refusal(tables, "CAST(review AS INTEGER) > 1");
      expect(fromData.message).toMatch(/^where: Conversion Error: a text could not be read as INTEGER \('review' is VARCHAR\): /);
      expect(fromData.message).not.toMatch(/Great/);
    }
  });
});
