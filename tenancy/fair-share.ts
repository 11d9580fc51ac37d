// Fair shares between keys: of the workers by start-time fair queuing (a deficit round robin over shards), and of
// the queue's places by an equal share each. Each key has a virtual time, the shards it was given over its weight; a claim among batches of equal urgency goes to the key whose
// next shard starts earliest in virtual time, not to the oldest batch, so one key's 50 queued batches do not hold
// back another key's single one. A key back from idle starts at the clock (the start of the latest claim), level
// with the others, not with the credit of its idle time. SLA urgency and resumed shards still come first: fairness
// only orders what they leave tied. A claim of several shards takes them from the key whose turn it is (workers
// claim one at a time). The PostgreSQL queue keeps the same state in its tables (postgres/shards.ts).
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

/** Whether a key's new batch may join the queue, and, refused, whether for the queue's bound or the key's share. */
export interface QueueRoom {
  admit: boolean;
  /** Refused for its share: other keys' batches wait and this key holds `held` of the `keys` keys' equal shares. */
  share?: { held: number; max: number; keys: number };
  /** Refused under its share, the queue full: `held` of its batches and `others` of the other keys' fill the `max` places. */
  full?: { held: number; max: number; keys: number; others: number };
}

/**
 * The queue's `max` places shared between keys, so one key's many batches never keep another's one out: while other
 * keys have batches queued, a key holding its share (max over the keys with batches queued, itself counted) is
 * refused though places are free, which stay for the others; and a key with none queued is admitted even into a
 * full queue (one batch a key past `max`, at most). Alone, a key may fill the queue. `queued`: batches queued by
 * shareKey.
 */
export function queueRoom(queued: ReadonlyMap<string, number>, owner: Owner, max: number): QueueRoom {
  const me = shareKey(owner);
  const held = queued.get(me) ?? 0;
  let total = 0;
  let keys = 1;
  for (const [k, n] of queued) {
    if (n <= 0) continue;
    total += n;
    if (k !== me) keys++;
  }
  if (held === 0) return { admit: true };
  if (keys > 1 && held >= Math.ceil(max / keys)) return { admit: false, share: { held, max, keys } };
  return total < max ? { admit: true } : { admit: false, full: { held, max, keys, others: total - held } };
}
