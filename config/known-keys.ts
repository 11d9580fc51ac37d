// Keys a file the service reads may hold, and the refusal of any other: a misspelt key (`thread` for `threads`) is
// named with the nearest valid one, never ignored.
import { distance } from "fastest-levenshtein";
import { z } from "zod";

/** The valid key `key` most likely meant: the nearest by edit distance (case aside), if it is near enough. */
export function nearestKey(key: string, valid: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const v of valid) {
    const d = distance(key.toLowerCase(), v.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [v, d];
  }
  // A third of the key's letters, at least two: `thread` -> `threads`, `contxt_size` -> `context_size`, not `a` -> `gpu`.
  return best !== undefined && bestDistance <= Math.max(2, Math.ceil(key.length / 3)) ? best : undefined;
}

/** "unknown key 'thread' (did you mean 'threads'?)", else the keys that are valid there; `noun` as the file calls them. */
export function unknownKey(key: string, valid: readonly string[], noun = "key"): string {
  const near = nearestKey(key, valid);
  return `unknown ${noun} '${key}' (${near ? `did you mean '${near}'?` : `valid ${noun}s: ${valid.join(", ")}`})`;
}

/** zod's strict object whose refusal of an unknown key names it and the nearest valid one (unknownKey). */
export function strictObject<T extends z.core.$ZodLooseShape>(shape: T, noun = "key") {
  const valid = Object.keys(shape);
  return z.strictObject(shape, {
    error: (issue) => (issue.code === "unrecognized_keys" ? issue.keys.map((k) => unknownKey(k, valid, noun)).join("; ") : undefined),
  });
}
