// What the console shows of a batch's failed lines: the first lines of its error file, each with its line number in
// the input (the error file has only custom_ids), in input order, and how many lines failed against how many a
// cancel, an expiry or a stop left unrun. An error of the batch as a whole (a token limit, a stop rule, the input
// file's problems at validation, where no request ran) is its reason, shown as such, not a failed line. An ended
// batch's files never change, so its answer is kept.
import type { Batch } from "../domain/objects.js";
import type { BatchInspection } from "../domain/ports.js";
import { errorCodeOf } from "../domain/retry.js";

/** Failed lines shown per batch. */
export const LINE_ERRORS = 100;
/** Codes of lines that never ran: the batch ended first. */
export const NOT_RUN_CODES = new Set(["batch_cancelled", "batch_expired", "batch_failed"]);
/** Ended batches whose answers are kept (each at most LINE_ERRORS lines). */
const KEPT = 64;

export type LineErrors = Pick<BatchInspection, "line_errors" | "line_error_counts">;

interface Sources {
  /** The error file's lines, or none. */
  errorLines: () => AsyncIterable<string>;
  /** The input file's lines, or none (deleted). */
  inputLines: () => AsyncIterable<string>;
}

const kept = new Map<string, LineErrors>();

export async function lineErrors(batch: Batch, src: Sources): Promise<LineErrors> {
  const ended = batch.error_file_id !== null && batch.error_file_id !== undefined;
  const key = `${batch.id}/${batch.error_file_id}`;
  const hit = ended ? kept.get(key) : undefined;
  if (hit) return hit;
  const line_errors: BatchInspection["line_errors"] = [];
  const counts = { failed: 0, not_run: 0 };
  for await (const text of src.errorLines()) {
    const l = JSON.parse(text) as Parameters<typeof errorCodeOf>[0] & {
      custom_id?: string;
      error?: { message?: string } | null;
      response?: { body?: { error?: { message?: string } } } | null;
    };
    const code = errorCodeOf(l);
    const notRun = NOT_RUN_CODES.has(code);
    counts[notRun ? "not_run" : "failed"]++;
    if (line_errors.length >= LINE_ERRORS) continue;
    const message = l.error?.message ?? l.response?.body?.error?.message ?? "";
    line_errors.push({ line: null, custom_id: l.custom_id ?? null, code, message: String(message), not_run: notRun });
  }
  await numberLines(line_errors, src.inputLines());
  line_errors.sort((a, b) => (a.line ?? Number.MAX_SAFE_INTEGER) - (b.line ?? Number.MAX_SAFE_INTEGER));
  const out = { line_errors, line_error_counts: counts };
  if (ended) {
    kept.set(key, out);
    if (kept.size > KEPT) kept.delete(kept.keys().next().value!);
  }
  return out;
}

/** Each shown error's 1-based line in the input, found by its custom_id (unique in a batch). */
async function numberLines(errors: BatchInspection["line_errors"], input: AsyncIterable<string>): Promise<void> {
  const wanted = new Map(errors.filter((e) => e.custom_id !== null).map((e) => [e.custom_id!, e]));
  if (wanted.size === 0) return;
  let n = 0;
  for await (const text of input) {
    n++;
    // Cheap before a parse: most lines are not wanted.
    const at = text.indexOf('"custom_id"');
    if (at < 0) continue;
    const id = (JSON.parse(text) as { custom_id?: unknown }).custom_id;
    const e = typeof id === "string" ? wanted.get(id) : undefined;
    if (!e) continue;
    e.line = n;
    wanted.delete(id as string);
    if (wanted.size === 0) return;
  }
}
