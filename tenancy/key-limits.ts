// Where a batch is checked against its key's enqueued-token limits: its estimate by the model that serves each line,
// the limits its key has on those models, the comparison the state applies atomically with the batch's insert
// (embedded/ and postgres/ sum what the key's open batches hold), and the failed batch OpenAI answers when a batch
// passes one. A synchronous request is checked beside it, in sync-accounts.ts, against the same open batches and
// the key's other running requests.
import type { ModelRegistry } from "../backends/registry.js";
import { transition } from "../domain/batch-state.js";
import type { Batch } from "../domain/objects.js";
import type { Owner } from "../domain/ports.js";
import { TokenLimitReached } from "../state/ports.js";

/** A key's enqueued-token limit on a model (undefined: none). */
export type LimitOf = (owner: Owner, model: string) => number | undefined;

/** A batch's estimated tokens by the model that serves each line (`byName`: by the name each line gives), and its key's limits on those models. */
export function batchLimits(
  byName: Record<string, number>,
  fallbackModel: string | undefined,
  owner: Owner,
  registry: ModelRegistry,
  limitOf: LimitOf | undefined,
): { enqueued: Record<string, number>; tokenLimits: Record<string, number> } {
  const enqueued: Record<string, number> = {};
  for (const [named, tokens] of Object.entries(byName)) {
    const model = registry.resolve(named || undefined)?.name ?? (named || fallbackModel || "");
    enqueued[model] = (enqueued[model] ?? 0) + tokens;
  }
  const tokenLimits: Record<string, number> = {};
  for (const model of Object.keys(enqueued)) {
    const limit = limitOf?.(owner, model);
    if (limit !== undefined) tokenLimits[model] = limit;
  }
  return { enqueued, tokenLimits };
}

/** Throws TokenLimitReached for the first model on which what the key holds (`held`) and `want` pass its limit. */
export function checkTokenLimits(
  tokenLimits: Record<string, number>,
  want: Record<string, number> | undefined,
  held: (model: string) => number,
): void {
  for (const [model, limit] of Object.entries(tokenLimits)) {
    const [has, asks] = [held(model), want?.[model] ?? 0];
    if (has + asks > limit) throw new TokenLimitReached(model, limit, has, asks);
  }
}

/** Ends `batch` failed at `now` with OpenAI's token_limit_exceeded error: no request runs, none is counted. */
export function failOverLimit(batch: Batch, err: TokenLimitReached, keyId: string | null, now: number): void {
  const n = (x: number) => x.toLocaleString("en-US");
  const who = keyId ? ` for API key ${keyId}` : "";
  batch.errors = {
    object: "list",
    data: [
      {
        code: "token_limit_exceeded",
        message:
          `Enqueued token limit reached for ${err.model}${who}. Limit: ${n(err.limit)} enqueued tokens ` +
          `(already enqueued: ${n(err.enqueued)}; this batch: ${n(err.requested)}). ` +
          "Please try again once some in_progress batches have been completed.",
        line: null,
        param: null,
      },
    ],
  };
  batch.request_counts = { completed: 0, failed: 0, total: 0 };
  transition(batch, "failed", now);
}
