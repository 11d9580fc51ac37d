// A `where` checked on DuckDB's own parse of it (json_serialize_sql) before it runs: one condition over the row's own
// values, its functions scalar ones that depend on their arguments alone, so it reads nothing else (a setting, the
// environment, a file, the clock) and keeps the same rows each time the table is read.
import type { DuckDBConnection } from "@duckdb/node-api";
import { DatasetError } from "./tables.js";

/**
 * The clause a `where` is read in, by the check and by the query alike; the newline ends a trailing `--` comment
 * before the parenthesis closes.
 */
export const whereClause = (where: string) => `WHERE (${where}\n)`;

/** Why a part of a `where` is refused. */
type Reason = "changes" | "state" | "beyond" | "not-scalar" | "unknown";

const WHY: Record<Reason, string> = {
  changes:
    "gives another value each time the table is read, and the answers are joined back to the rows by their place: filter on the rows' own values (to sample, hash(<column>) % 10 = 0)",
  state:
    "reads state beyond the row (a setting, the environment, the version, the catalog), which a where may not: filter on the rows' own values",
  beyond: "reads beyond the row (a table, a file, DuckDB's catalog), which a where may not: filter on the rows' own values",
  "not-scalar":
    "is not taken in a where, which is one condition over each row's own columns (comparisons, AND, OR, NOT, LIKE, IN lists, CASE, casts, scalar functions)",
  unknown: "is none of DuckDB's scalar functions",
};

interface Problem {
  reason: Reason;
  /** The part refused, as the user wrote it: `version()`, `current_date`, `a subquery (SELECT ...)`. */
  what: string;
}

/** DuckDB's functions that it marks consistent but that read the clock or the machine's state: refused by name. */
const READ_STATE = new Map<string, Reason>([
  ["current_localtime", "changes"],
  ["current_localtimestamp", "changes"],
  ["current_setting", "state"],
  ["getvariable", "state"],
  ["version", "state"],
  // Plans a query of its own: binds tables and settings.
  ["json_serialize_plan", "state"],
  // How DuckDB holds a value in memory, which may differ between two reads of the same rows.
  ["vector_type", "changes"],
]);
/** Of the functions DuckDB marks not consistent, those that give another value each call; the others read or change state. */
const CHANGES = new Set([
  "random",
  "uuid",
  "uuidv4",
  "uuidv7",
  "gen_random_uuid",
  "now",
  "today",
  "current_date",
  "get_current_time",
  "get_current_timestamp",
  "transaction_timestamp",
]);
/**
 * Names DuckDB's binder reads as a call when no column has them (SQL's value functions), each with the function it
 * calls; a column of that name is the column.
 */
export const VALUE_KEYWORDS = new Map([
  ["current_date", "current_date"],
  ["current_time", "get_current_time"],
  ["current_timestamp", "get_current_timestamp"],
  ["localtime", "current_localtime"],
  ["localtimestamp", "current_localtimestamp"],
  ["current_catalog", "current_catalog"],
  ["current_schema", "current_schema"],
  ["current_role", "current_role"],
  ["current_user", "current_user"],
  ["session_user", "session_user"],
  ["user", "user"],
]);
/** The functions that apply an aggregate named by a string to a list; an aggregate that samples at random is refused. */
const LIST_AGGREGATES = new Set(["list_aggr", "list_aggregate", "array_aggr", "array_aggregate", "aggregate"]);
const RANDOM_AGGREGATES = new Set(["reservoir_quantile"]);
/** Path functions whose `'system'` separator is the server's own. */
const PATH_FUNCTIONS = new Set(["parse_path", "parse_dirname", "parse_dirpath", "parse_filename"]);
/** Expression classes a `where` may hold; the rest (SUBQUERY, STAR, WINDOW, PARAMETER, ...) are refused. */
const CLASSES = new Set([
  "BETWEEN",
  "CASE",
  "CAST",
  "COLLATE",
  "COLUMN_REF",
  "COMPARISON",
  "CONJUNCTION",
  "CONSTANT",
  "FUNCTION",
  "LAMBDA",
  "OPERATOR",
]);
const PAST_THE_CONDITION = "anything past the condition (a UNION, GROUP BY, WINDOW, a second statement)";
const SUBQUERY = "a subquery (SELECT ..., EXISTS, IN (SELECT ...))";
const CONSTRUCTS = new Map([
  ["SUBQUERY", SUBQUERY],
  ["STAR", "COLUMNS(...) or *"],
  ["WINDOW", "a window function (OVER ...)"],
  ["PARAMETER", "a parameter (?, $1)"],
  ["POSITIONAL_REFERENCE", "a positional reference (#1)"],
]);

type Node = Record<string, unknown>;
const isNode = (v: unknown): v is Node => v !== null && typeof v === "object" && !Array.isArray(v);

interface Entry {
  type: string;
  stability: string | null;
  parameters: string[];
  /** A macro's definition as parsed (the parse's JSON); undefined where it would not parse. */
  macro?: unknown;
}

/** DuckDB's functions by lowercase name, and the verdict on each name once judged. */
class Catalogue {
  private readonly verdicts = new Map<string, Reason | null>();

  constructor(
    private readonly entries: Map<string, Entry[]>,
    private readonly skeleton: string,
    /** The subquery DuckDB's parser makes of `x = ANY(list)`, without its select list. */
    private readonly anyOfList: string,
  ) {}

  /** `x = ANY(list)` (and `ALL`) as DuckDB parses it: the list's elements, or undefined for any other subquery. */
  listOf(n: Node): unknown {
    const node = (n.subquery as { node?: Node } | undefined)?.node;
    if (n.subquery_type !== "ANY" || !node || positionless({ ...node, select_list: null }) !== this.anyOfList) return undefined;
    const [call, ...more] = node.select_list as unknown[];
    if (more.length > 0 || !isNode(call) || call.class !== "FUNCTION" || call.function_name !== "unnest") return undefined;
    const { children, filter, distinct, order_bys, schema, catalog } = call as Record<string, unknown>;
    const plain = !filter && !distinct && !schema && !catalog && !(order_bys as { orders?: unknown[] }).orders?.length;
    return plain && Array.isArray(children) && children.length === 1 ? children[0] : undefined;
  }

  /** The statement `SELECT * FROM t WHERE (...)` parsed: the where's expression, or the problem with its shape. */
  whereOf(parsed: unknown): { expr: unknown } | Problem {
    const p = parsed as { statements?: Array<{ node?: Node }> };
    const node = p.statements?.length === 1 ? p.statements[0].node : undefined;
    if (!node || shape(node) !== this.skeleton) return { reason: "not-scalar", what: PAST_THE_CONDITION };
    return { expr: node.where_clause };
  }

  /** Why `name` may not be called in a where, or null when it may. */
  verdict(name: string): Reason | null {
    const known = this.verdicts.get(name);
    if (known !== undefined) return known;
    // A macro that reached itself again is refused rather than followed round.
    this.verdicts.set(name, "unknown");
    const verdict = this.judge(name);
    this.verdicts.set(name, verdict);
    return verdict;
  }

  private judge(name: string): Reason | null {
    const all = this.entries.get(name) ?? [];
    const callable = all.filter((e) => e.type === "scalar" || e.type === "macro");
    if (callable.length === 0) {
      if (all.some((e) => e.type === "table" || e.type === "table_macro" || e.type === "pragma")) return "beyond";
      return all.length > 0 ? "not-scalar" : "unknown";
    }
    const named = READ_STATE.get(name);
    if (named) return named;
    for (const e of callable) {
      if (e.type === "scalar" && e.stability !== "CONSISTENT") return CHANGES.has(name) ? "changes" : "state";
      if (e.type === "macro") {
        const body = isNode(e.macro) ? this.whereOf(e.macro) : undefined;
        if (!body || "reason" in body) return "state";
        const problem = findProblem(body.expr, this, new Set(e.parameters.map((p) => p.toLowerCase())));
        if (problem) return problem.reason;
      }
    }
    return null;
  }
}

/** A parsed statement without its where and the parser's positions: what every checked where must leave as it is. */
const shape = (node: Node) => positionless({ ...node, where_clause: null });
const positionless = (node: Node) => JSON.stringify(node, (k, v) => (k === "query_location" ? undefined : v));

/** The first part of a where's expression that it may not hold; `columns` are the names a bare name may be. */
function findProblem(expr: unknown, catalogue: Catalogue, columns: ReadonlySet<string>): Problem | undefined {
  const visit = (n: unknown, bound: ReadonlySet<string>): Problem | undefined => {
    if (Array.isArray(n)) {
      for (const x of n) {
        const p = visit(x, bound);
        if (p) return p;
      }
      return undefined;
    }
    if (!isNode(n)) return undefined;
    if (typeof n.class !== "string") {
      // A query's parts (a SELECT's node, a table) never sit in an expression but under a subquery.
      if ("from_table" in n || "select_list" in n) return { reason: "beyond", what: SUBQUERY };
      return visit(Object.values(n), bound);
    }
    if (n.class === "SUBQUERY") {
      // `x = ANY(tags)` is a subquery over the row's own list: its value and its list are checked instead.
      const list = catalogue.listOf(n);
      if (list !== undefined) return visit([n.child, list], bound);
    }
    if (!CLASSES.has(n.class))
      return { reason: n.class === "SUBQUERY" ? "beyond" : "not-scalar", what: CONSTRUCTS.get(n.class) ?? n.class.toLowerCase() };
    if (n.class === "CONSTANT") return undefined;
    if (n.class === "COLUMN_REF") return columnProblem(n, catalogue, bound);
    // `x -> ...` is a lambda's parameters or, where DuckDB binds it so, JSON's arrow on any expression: the left side
    // is checked as an expression too (a parameter named like current_date is refused with it).
    if (n.class === "LAMBDA") return visit(n.lhs, bound) ?? visit(n.expr, new Set([...bound, ...lambdaParameters(n.lhs)]));
    if (n.class === "FUNCTION") {
      const p = callProblem(n, catalogue);
      if (p) return p;
    }
    return visit(Object.values(n), bound);
  };
  return visit(expr, columns);
}

/** A bare name that is no column nor lambda parameter, and that DuckDB's binder would read as a call. */
function columnProblem(n: Node, catalogue: Catalogue, bound: ReadonlySet<string>): Problem | undefined {
  const names = n.column_names as string[];
  const name = names[0].toLowerCase();
  const calls = VALUE_KEYWORDS.get(name);
  if (names.length > 1 || bound.has(name) || !calls) return undefined;
  const reason = catalogue.verdict(calls);
  return reason ? { reason, what: names[0] } : undefined;
}

function callProblem(n: Node, catalogue: Catalogue): Problem | undefined {
  const name = String(n.function_name).toLowerCase();
  const what = `${String(n.function_name)}()`;
  const args = (n.children as unknown[] | undefined) ?? [];
  const orders = (n.order_bys as { orders?: unknown[] } | undefined)?.orders ?? [];
  if (n.filter || n.distinct || orders.length > 0) return { reason: "not-scalar", what: `${what} with FILTER, DISTINCT or ORDER BY` };
  const reason = catalogue.verdict(name);
  if (reason) return { reason, what };
  // age(t) is the time from t to now; age(a, b) depends on its arguments alone.
  if (name === "age" && args.length < 2) return { reason: "changes", what: "age() of one timestamp" };
  if (LIST_AGGREGATES.has(name) && RANDOM_AGGREGATES.has(String(constantOf(args[1])).toLowerCase()))
    return { reason: "changes", what: `${what} of ${String(constantOf(args[1]))}` };
  if (PATH_FUNCTIONS.has(name) && args.length > 1) {
    const separator = constantOf(args[args.length - 1]);
    if (typeof separator !== "string" && typeof separator !== "boolean")
      return { reason: "state", what: `${what} with a separator not written out` };
    if (typeof separator === "string" && separator.toLowerCase() === "system")
      return { reason: "state", what: `${what} with the 'system' separator` };
  }
  return undefined;
}

/** A constant's value as the parse holds it; undefined for anything else. */
function constantOf(n: unknown): unknown {
  if (!isNode(n) || n.class !== "CONSTANT") return undefined;
  return (n.value as { value?: unknown } | undefined)?.value;
}

/** The names a lambda binds: `x -> ...`, `(x, i) -> ...`, `lambda x, i: ...`. */
function lambdaParameters(lhs: unknown): string[] {
  if (!isNode(lhs)) return [];
  if (lhs.class === "COLUMN_REF") return [(lhs.column_names as string[]).join(".").toLowerCase()];
  return ((lhs.children as unknown[] | undefined) ?? []).flatMap(lambdaParameters);
}

const literal = (s: string) => `'${s.replaceAll("'", "''")}'`;
const parse = (sql: string) => `json_serialize_sql(${literal(`SELECT * FROM t ${whereClause(sql)}`)})`;

let loaded: Promise<Catalogue> | undefined;

/** DuckDB's functions and their macros' parses, read once: the built-in catalogue of the pinned DuckDB. */
function catalogue(conn: DuckDBConnection): Promise<Catalogue> {
  loaded ??= (async () => {
    const r = await conn.runAndReadAll(
      `SELECT lower(function_name) AS name, function_type AS type, stability, parameters,
        CASE WHEN function_type = 'macro' THEN json_serialize_sql('SELECT * FROM t WHERE (' || macro_definition || chr(10) || ')') END AS macro,
        ${parse("TRUE")} AS skeleton, ${parse("NULL = ANY([])")} AS any_of_list
      FROM duckdb_functions()`,
    );
    const entries = new Map<string, Entry[]>();
    let skeleton = "";
    let anyOfList = "";
    for (const row of r.getRowObjectsJS()) {
      const macro = row.macro === null ? undefined : (JSON.parse(String(row.macro)) as { error?: boolean });
      const entry: Entry = {
        type: String(row.type),
        stability: row.stability === null ? null : String(row.stability),
        parameters: ((row.parameters as unknown[] | null) ?? []).map(String),
        macro: macro?.error ? undefined : macro,
      };
      const name = String(row.name);
      entries.set(name, [...(entries.get(name) ?? []), entry]);
      skeleton = String(row.skeleton);
      anyOfList = String(row.any_of_list);
    }
    const parsed = JSON.parse(skeleton) as { statements: Array<{ node: Node }> };
    const any = (JSON.parse(anyOfList) as { statements: Array<{ node: { where_clause: { subquery: { node: Node } } } }> }).statements[0];
    return new Catalogue(
      entries,
      shape(parsed.statements[0].node),
      positionless({ ...any.node.where_clause.subquery.node, select_list: null }),
    );
  })().catch((err) => {
    loaded = undefined;
    throw err;
  });
  return loaded;
}

/**
 * Refuses a `where` that is more than one condition over the row's own `columns`, or that calls what reads beyond
 * them (a subquery, a table function, a setting, the clock, randomness), naming the part and why. A `where` DuckDB
 * cannot parse is thrown as DuckDB's own Parser Error, for the caller to tell back as it tells DuckDB's errors.
 */
export async function checkWhere(conn: DuckDBConnection, where: string, columns: readonly string[]): Promise<void> {
  const cat = await catalogue(conn);
  // Read again one parenthesis deeper: a where that closes the clause's parenthesis to add one of its own (WINDOW,
  // which the parse's JSON leaves out) is no longer valid SQL there.
  const nested = literal(`SELECT * FROM t WHERE ((${where}\n))`);
  const r = await conn.runAndReadAll(`SELECT ${parse(where)} AS j, json_serialize_sql(${nested}) AS nested`);
  const [json, nestedJson] = r.getRowsJS()[0].map(String);
  const parsed = JSON.parse(json) as { error?: boolean; error_type?: string; error_message?: string };
  if (parsed.error) {
    if (parsed.error_type === "parser") throw new Error(`Parser Error: ${parsed.error_message}`);
    throw new DatasetError(`where: DuckDB could not check it (${parsed.error_type ?? "unknown error"})`, parsed.error_message, "where");
  }
  if ((JSON.parse(nestedJson) as { error?: boolean }).error)
    throw new DatasetError(`where: ${PAST_THE_CONDITION} ${WHY["not-scalar"]}`, undefined, "where");
  const found = cat.whereOf(parsed);
  const problem = "reason" in found ? found : findProblem(found.expr, cat, new Set(columns.map((c) => c.toLowerCase())));
  if (problem) throw new DatasetError(`where: ${problem.what} ${WHY[problem.reason]}`, undefined, "where");
}
