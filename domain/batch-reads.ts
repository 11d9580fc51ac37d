// What the routes read of batches: one, a page, and the result lines so far.
import type { Batch } from "./objects.js";
import type { Awaitable, Owner, Page } from "./ports.js";

export interface BatchReads {
  get(id: string, owner: Owner): Awaitable<Batch | undefined>;
  list(q: { after?: string; limit: number; owner: Owner }): Awaitable<Page<Batch>>;
  /**
   * The batch's result lines so far (the proof of concept's /results route), whole lines only: a line being
   * written is left for the next read. Undefined when no result exists yet.
   */
  results(id: string, owner: Owner): Awaitable<AsyncIterable<string> | undefined>;
}
