// How deep a client's JSON nests, measured without recursion, and the one bound on it: every walk of a request (a
// JSON schema made a grammar, a token estimate, a translation, JSON.stringify itself) recurses, so a body nested
// thousands deep would overflow the stack; a body past the bound is refused first, as a 400 naming its field.
import { RequestError } from "./errors.js";
import { paramPath } from "./zod-errors.js";

/** Objects and arrays nest at most this deep in a request body (the body itself is level 1). */
export const MAX_JSON_DEPTH = 64;

/** Segments of the path a refusal shows, so its message stays short however deep the body goes. */
const SHOWN_SEGMENTS = 6;

interface PathNode {
  key: string | number;
  parent: PathNode | null;
}

/** The path to the first object or array nested deeper than `limit` levels, or null where none is. */
export function tooDeepAt(value: unknown, limit = MAX_JSON_DEPTH): Array<string | number> | null {
  const stack: Array<{ value: unknown; depth: number; at: PathNode | null }> = [{ value, depth: 1, at: null }];
  while (stack.length > 0) {
    const { value: v, depth, at } = stack.pop()!;
    if (v === null || typeof v !== "object") continue;
    if (depth > limit) return pathOf(at);
    const entries: Array<[string | number, unknown]> = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    for (const [key, child] of entries)
      if (child !== null && typeof child === "object") stack.push({ value: child, depth: depth + 1, at: { key, parent: at } });
  }
  return null;
}

function pathOf(node: PathNode | null): Array<string | number> {
  const path: Array<string | number> = [];
  for (let n = node; n; n = n.parent) path.push(n.key);
  return path.reverse();
}

/** The refusal of a body nested too deep: `param` is its top field (`response_format`), the message says where. */
export function nestingTooDeep(path: ReadonlyArray<string | number>, prefix?: string): RequestError {
  const field = paramPath(path.slice(0, 1), prefix);
  const shown = paramPath(path.slice(0, SHOWN_SEGMENTS), prefix);
  const where = path.length > SHOWN_SEGMENTS ? `${shown}…` : shown;
  return new RequestError(
    `Invalid '${field ?? "body"}': it nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep (at ${where ?? "the body"}); ` +
      `a request body may nest at most ${MAX_JSON_DEPTH} levels.`,
    "nesting_too_deep",
    false,
    field,
  );
}

/** Throws nestingTooDeep where `body` nests past the bound. */
export function checkNesting(body: unknown, prefix?: string): void {
  const path = tooDeepAt(body);
  if (path) throw nestingTooDeep(path, prefix);
}
