// zod issues as OpenAI words its 400s: one sentence, and `param` the path of the field at fault.
import type { z } from "zod";

/** A zod issue path as OpenAI writes `param`: messages[0].content */
export function paramPath(path: ReadonlyArray<PropertyKey>, prefix?: string): string | null {
  let out = prefix ?? "";
  for (const k of path) out += typeof k === "number" ? `[${k}]` : out ? `.${String(k)}` : String(k);
  return out || null;
}

/** One readable sentence from a zod error: the first issue, with where it is. */
export function describeIssue(
  err: z.ZodError,
  input: unknown,
  prefix?: string,
): { message: string; param: string | null; missing: boolean; unknown?: boolean } {
  const { issue, path } = mostSpecific(err.issues[0], err.issues[0].path);
  const param = paramPath(path, prefix);
  if (issue.code === "unrecognized_keys") {
    const key = paramPath([...path, issue.keys[0]], prefix);
    return { message: `Unrecognized request argument supplied: '${key}'.`, param: key, missing: false, unknown: true };
  }
  const missing = (issue.code === "invalid_type" || issue.code === "invalid_union") && valueAt(input, path) === undefined;
  if (missing) return { message: `Missing required parameter: '${param}'.`, param, missing };
  return { message: param ? `Invalid '${param}': ${issue.message}` : issue.message, param, missing };
}

/**
 * A failed union says only "Invalid input"; the branch whose type did match (its first issue is not
 * a type mismatch at the union itself) tells what is actually wrong, e.g. the 5th stop sequence.
 */
function mostSpecific(issue: z.core.$ZodIssue, path: PropertyKey[]): { issue: z.core.$ZodIssue; path: PropertyKey[] } {
  if (issue.code !== "invalid_union") return { issue, path };
  for (const branch of issue.errors) {
    const first = branch[0];
    if (first && !(first.code === "invalid_type" && first.path.length === 0)) return mostSpecific(first, [...path, ...first.path]);
  }
  return { issue, path };
}

/** What `input` holds at `path`; undefined where nothing was sent. */
export function valueAt(input: unknown, path: ReadonlyArray<PropertyKey>): unknown {
  let v: unknown = input;
  for (const k of path) {
    if (v == null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}
