// `{{column}}` placeholders in a job's messages, prompt or body: which columns a template names, and a row's
// rendering of it. The rules (docs/datasets.md): a placeholder is `{{name}}`, spaces inside the braces ignored;
// `\{{` writes a literal `{{`; strings go in as they are, numbers and booleans as their text, lists and structs as
// JSON; a null is an error naming the column, because a prompt silently missing its text is a wrong answer.

/** A column's value as the table library hands it over: JSON-like, with bigints for 64-bit integers. */
export type Cell = string | number | bigint | boolean | null | Cell[] | { [key: string]: Cell };
export type Row = Record<string, Cell>;

/** A row whose value cannot go into a template: the column and why; the caller adds the row's place. */
export class RenderError extends Error {
  constructor(
    readonly column: string,
    message: string,
  ) {
    super(message);
    this.name = "RenderError";
  }
}

const PLACEHOLDER = /\\\{\{|\{\{\s*([^{}]+?)\s*\}\}/g;

/** The columns a template names, in order of first use. */
export function columnsOf(template: unknown): string[] {
  const out = new Set<string>();
  visitStrings(template, (s) => {
    for (const m of s.matchAll(PLACEHOLDER)) if (m[1] !== undefined) out.add(m[1]);
  });
  return [...out];
}

/** The template with each string's placeholders filled from `row`. */
export function render<T>(template: T, row: Row): T {
  return mapStrings(template, (s) =>
    s.replace(PLACEHOLDER, (_whole, name: string | undefined) => (name === undefined ? "{{" : text(row, name))),
  );
}

/** One cell as template text. */
function text(row: Row, column: string): string {
  if (!(column in row)) throw new RenderError(column, `the input has no column '${column}'`);
  const value = row[column];
  if (value === null || value === undefined)
    throw new RenderError(column, `column '${column}' is null (leave such rows out with where: "${column}" IS NOT NULL)`);
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "bigint" || typeof value === "boolean") return String(value);
  return JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? Number(v) : v));
}

function visitStrings(value: unknown, visit: (s: string) => void): void {
  if (typeof value === "string") visit(value);
  else if (Array.isArray(value)) for (const v of value) visitStrings(v, visit);
  else if (value && typeof value === "object") for (const v of Object.values(value)) visitStrings(v, visit);
}

function mapStrings<T>(value: T, map: (s: string) => string): T {
  if (typeof value === "string") return map(value) as T;
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, map)) as T;
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mapStrings(v, map)])) as T;
  }
  return value;
}
