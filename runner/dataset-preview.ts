// --dry-run's preview of a dataset job: how many rows, the first three requests with what they share shown once
// (a schema or the parameters, not three times over; a part the first row already showed as `…`), long text cut,
// and the output's columns with their types as its format will hold them, in one vocabulary.
import path from "node:path";
import type { Job } from "../datasets/job.js";
import { type Preprocess, requestLines } from "../datasets/requests.js";
import type { OutputColumns } from "../datasets/stage.js";
import type { TableInput, Tables } from "../datasets/tables.js";

const SHOWN_ROWS = 3;
/** A string in a previewed body is cut past this many characters. */
const TEXT_CHARS = 80;
/** A previewed line is cut past this many characters. */
const LINE_CHARS = 240;

export async function previewJob(
  job: Job,
  tables: Tables,
  input: TableInput,
  o: { hash: string; label: string; columns: OutputColumns; preprocess?: Preprocess },
): Promise<string> {
  const bodies: Array<Record<string, unknown>> = [];
  for await (const lines of requestLines(job, input, {
    hash: o.hash,
    label: o.label,
    max: SHOWN_ROWS,
    ...(o.preprocess ? { preprocess: o.preprocess } : {}),
  })) {
    for (const line of lines) bodies.push((JSON.parse(line) as { body: Record<string, unknown> }).body);
  }
  const rows = await input.count();
  const out = [
    `${o.label}: ${rows} rows${job.where ? ` where ${job.where}` : ""}, each a request to ${job.endpoint}; the first ${bodies.length}:`,
  ];
  // What every shown request sends alike is shown once, after what each sends of its own.
  const shared = bodies.length > 1 ? Object.keys(bodies[0]).filter((k) => bodies.every((b) => same(b[k], bodies[0][k]))) : [];
  const own = (body: Record<string, unknown>) => Object.fromEntries(Object.entries(body).filter(([k]) => !shared.includes(k)));
  for (const [i, body] of bodies.entries()) out.push(`  row ${i + 1}: ${compact(i === 0 ? own(body) : elide(own(body), own(bodies[0])))}`);
  if (shared.length) out.push("  and in each of them:");
  for (const k of shared) out.push(`    ${k}: ${compact(bodies[0][k])}`);
  const types = tables.outputTypes(input, { keep: o.columns.keep, columns: o.columns.results, output: job.output });
  const width = Math.max(...types.map((c) => c.name.length));
  const typeWidth = Math.max(...types.map((c) => c.type.length));
  const kept = new Set(o.columns.keep);
  out.push(`${path.basename(job.output)} will hold ${types.length} columns:`);
  for (const [i, c] of types.entries())
    out.push(
      `  ${c.name.padEnd(width)}  ${i < o.columns.keep.length && kept.has(c.name) ? `${c.type.padEnd(typeWidth)}  (input)` : c.type}`,
    );
  if (job.postprocess) out.push(`  ... and the columns ${path.basename(job.postprocess)} returns`);
  if (o.columns.note) out.push(`(${o.columns.note})`);
  return `${out.join("\n")}\n`;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const ELIDED = "\u0000same";

/** `value` with each list item or nested object that equals the first row's in its place shown as `…`. */
function elide(value: unknown, first: unknown): unknown {
  if (Array.isArray(value))
    return value.map((v, i) =>
      Array.isArray(first) && v !== null && typeof v === "object" && same(v, first[i])
        ? ELIDED
        : elide(v, (first as unknown[] | undefined)?.[i]),
    );
  if (value === null || typeof value !== "object") return value;
  const before = (first ?? {}) as Record<string, unknown>;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, v !== null && typeof v === "object" && same(v, before[k]) ? ELIDED : elide(v, before[k])]),
  );
}

/** One line of JSON, each long string cut, the whole line cut past LINE_CHARS. */
function compact(value: unknown): string {
  const text = JSON.stringify(value, (_k, v) =>
    typeof v === "string" && v.length > TEXT_CHARS ? `${v.slice(0, TEXT_CHARS)}… (${v.length} chars)` : v,
  );
  const shown = text.replaceAll(JSON.stringify(ELIDED), "…");
  return shown.length > LINE_CHARS ? `${shown.slice(0, LINE_CHARS)}… (${shown.length} chars)` : shown;
}
