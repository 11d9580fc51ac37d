// What the routes read of batches: one, a page, and the result lines so far.
import type { Batch } from "./objects.js";
import type { Awaitable, Owner, Page } from "./port-types.js";

export interface BatchReads {
  /** `owner` undefined: whoever owns it (an admin key's view). */
  get(id: string, owner: Owner | undefined): Awaitable<Batch | undefined>;
  /** Newest first; `owner` undefined: every owner's (an admin key's view). */
  list(q: { after?: string; limit: number; owner: Owner | undefined }): Awaitable<Page<Batch>>;
  /**
   * The batch's output lines committed so far (the results route), in its output file's
   * order. Undefined when none exists yet.
   */
  results(id: string, owner: Owner): Awaitable<AsyncIterable<string> | undefined>;
  /**
   * Its output lines committed so far from line `after` on (at most `limit`), in the one order its output file
   * will have too, so a reader that goes on after the lines it has never sees one twice. Undefined: no such batch.
   */
  output(id: string, owner: Owner | undefined, q: { after: number; limit?: number }): Awaitable<OutputLines | undefined>;
}

export interface OutputLines {
  /** The batch's status as the read began: once it is final, no line follows. */
  status: string;
  /** Lines committed so far (all of its output once it has ended). */
  committed: number;
  /** The line this answer ends after: a next read asks from there. */
  through: number;
  lines: AsyncIterable<string>;
}
