// Fair shares between keys: start-time fair queuing (a deficit round robin over shards). Each key has a virtual
// time, the shards it was given over its weight; a claim among batches of equal urgency goes to the key whose
// next shard starts earliest in virtual time, not to the oldest batch, so one key's 50 queued batches do not hold
// back another key's single one. A key back from idle starts at the clock (the start of the latest claim), level
// with the others, not with the credit of its idle time. SLA urgency and resumed shards still come first: fairness
// only orders what they leave tied. A claim of several shards takes them from the key whose turn it is (workers
// claim one at a time). The PostgreSQL queue keeps the same state in its tables (cluster/pg/shards.ts).
import type { Owner } from "../domain/ports.js";

export interface ShareState {
  /** Each owner's virtual time ("" for no owner). */
  vtime: Map<string, number>;
  clock: number;
}

export const shareKey = (owner: Owner) => owner ?? "";

/** The start tag of each candidate: its owner's turn, max(the owner's virtual time, the clock). */
export function startTags<T>(candidates: readonly T[], ownerOf: (c: T) => Owner, state: ShareState): Map<T, number> {
  const tags = new Map<T, number>();
  for (const c of candidates) tags.set(c, Math.max(state.vtime.get(shareKey(ownerOf(c))) ?? 0, state.clock));
  return tags;
}

/** Advances the state past claims given at these start tags: each moves its owner on by 1/weight. */
export function charge(
  state: ShareState,
  claims: Array<{ owner: Owner; tag: number }>,
  weights: Readonly<Record<string, number>> = {},
): void {
  const moved = new Map<string, number>();
  for (const { owner, tag } of claims) {
    const k = shareKey(owner);
    const next = (moved.get(k) ?? tag) + 1 / (weights[k] ?? 1);
    moved.set(k, next);
    state.vtime.set(k, Math.max(state.vtime.get(k) ?? 0, next));
    state.clock = Math.max(state.clock, tag);
  }
}
