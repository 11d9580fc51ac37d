// Cursor pagination over an already filtered and sorted list, as OpenAI's list endpoints do it:
// `after` names the last object of the previous page.

import { InvalidRequestError } from "./errors.js";
import type { Page } from "./ports.js";

export function paginate<T>(sorted: readonly T[], idOf: (item: T) => string, q: { after?: string; limit: number }): Page<T> {
  let start = 0;
  if (q.after) {
    const at = sorted.findIndex((item) => idOf(item) === q.after);
    // An unknown cursor (deleted, mistyped or another owner's) cannot be placed in the order.
    if (at === -1) throw new InvalidRequestError(`No object found with id '${q.after}' to list after.`, "invalid_request", "after");
    start = at + 1;
  }
  const limit = Math.max(1, Math.floor(q.limit));
  const data = sorted.slice(start, start + limit);
  return { data, has_more: start + data.length < sorted.length };
}
