// What the routes read of batches: one, a page, and the result lines so far.
import type { Batch } from "./objects.js";
import type { Awaitable, Owner, Page } from "./ports.js";

export interface BatchReads {
  /** `owner` undefined: whoever owns it (an admin key's view). */
  get(id: string, owner: Owner | undefined): Awaitable<Batch | undefined>;
  /** Newest first; `owner` undefined: every owner's (an admin key's view). */
  list(q: { after?: string; limit: number; owner: Owner | undefined }): Awaitable<Page<Batch>>;
  /**
   * The batch's result lines so far (the proof of concept's /results route), whole lines only: a line being
   * written is left for the next read. Undefined when no result exists yet.
   */
  results(id: string, owner: Owner): Awaitable<AsyncIterable<string> | undefined>;
}
