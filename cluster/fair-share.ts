// Fair shares between keys: start-time fair queuing (a deficit round robin over shards). Each key has a virtual
// time, the shards it was given over its weight; a claim among batches of equal urgency goes to the key whose
// next shard starts earliest in virtual time, not to the oldest batch, so one key's 50 queued batches do not hold
// back another key's single one. A key back from idle starts at the clock (the start of the latest claim), level
// with the others, not with the credit of its idle time. SLA urgency and resumed shards still come first: fairness
// only orders what they leave tied. The PostgreSQL queue keeps the same state in its tables (cluster/pg/shards.ts).
import type { Owner } from "../domain/ports.js";

export interface ShareState {
  /** Each owner's virtual time ("" for no owner). */
  vtime: Map<string, number>;
  clock: number;
}

export const shareKey = (owner: Owner) => owner ?? "";

/**
 * Start tags for candidates in their owners' order (each owner's candidates in the order they would run): an
 * owner's first starts at max(its virtual time, the clock), each next one 1/weight later.
 */
export function startTags<T>(
  candidates: readonly T[],
  ownerOf: (c: T) => Owner,
  state: ShareState,
  weights: Readonly<Record<string, number>> = {},
): Map<T, number> {
  const next = new Map<string, number>();
  const tags = new Map<T, number>();
  for (const c of candidates) {
    const k = shareKey(ownerOf(c));
    const tag = next.get(k) ?? Math.max(state.vtime.get(k) ?? 0, state.clock);
    tags.set(c, tag);
    next.set(k, tag + 1 / (weights[k] ?? 1));
  }
  return tags;
}

/** Advances the state past claims given at these start tags. */
export function charge(
  state: ShareState,
  claims: Array<{ owner: Owner; tag: number }>,
  weights: Readonly<Record<string, number>> = {},
): void {
  for (const { owner, tag } of claims) {
    const k = shareKey(owner);
    state.vtime.set(k, Math.max(state.vtime.get(k) ?? 0, tag + 1 / (weights[k] ?? 1)));
    state.clock = Math.max(state.clock, tag);
  }
}
