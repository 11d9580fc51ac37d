// The ResultCache in PostgreSQL, shared by every worker of the distributed mode: one table of sealed answers in
// least-recently-used order, and one row of totals that every write locks, so the byte bound holds across workers.
import type pg from "pg";
import {
  type CacheStats,
  checkScopeAndKey,
  openAnswer,
  type ResultCache,
  type ResultCacheLimits,
  type StoredAnswer,
  sealAnswer,
} from "../cache/port.js";
import { type Db, inTransaction } from "./db.js";

/** Oldest entries looked at per round of eviction. */
const EVICT_ROUND = 64;

export class PgResultCache implements ResultCache {
  private hits = 0;
  private misses = 0;
  private evictions = 0;
  private readonly touches = new Set<Promise<unknown>>();

  constructor(
    private readonly db: Db,
    private readonly limits: ResultCacheLimits,
    private readonly now: () => number = Date.now,
    /** What closes the connections when the cache has its own (the pool is otherwise the caller's). */
    private readonly release?: () => Promise<void>,
  ) {}

  async get(scope: string, key: string): Promise<StoredAnswer | undefined> {
    checkScopeAndKey(scope, key);
    const { rows } = await this.db.query("SELECT answer, stored_at FROM result_cache WHERE scope = $1 AND key = $2", [scope, key]);
    if (rows.length === 0) return this.miss();
    const expired = this.limits.ttlSeconds > 0 && this.now() - Number(rows[0].stored_at) >= this.limits.ttlSeconds * 1000;
    const answer = expired ? undefined : openAnswer(rows[0].answer as Buffer);
    if (!answer) {
      await inTransaction(this.db, (c) => this.remove(c, "scope = $1 AND key = $2", [scope, key]));
      if (expired) this.evictions++;
      return this.miss();
    }
    this.hits++;
    const touch = this.db
      .query("UPDATE result_cache SET used_seq = nextval('result_cache_seq') WHERE scope = $1 AND key = $2", [scope, key])
      .catch(() => undefined);
    this.touches.add(touch);
    void touch.finally(() => this.touches.delete(touch));
    return answer;
  }

  /** A read-only get (a plan asks): fresh and whole, with no hit counted, no recency refreshed and nothing removed. */
  async has(scope: string, key: string): Promise<boolean> {
    checkScopeAndKey(scope, key);
    const { rows } = await this.db.query("SELECT answer, stored_at FROM result_cache WHERE scope = $1 AND key = $2", [scope, key]);
    if (rows.length === 0) return false;
    const expired = this.limits.ttlSeconds > 0 && this.now() - Number(rows[0].stored_at) >= this.limits.ttlSeconds * 1000;
    return !expired && openAnswer(rows[0].answer as Buffer) !== undefined;
  }

  async put(scope: string, key: string, answer: StoredAnswer): Promise<void> {
    checkScopeAndKey(scope, key);
    const sealed = sealAnswer(answer);
    const bytes = sealed.byteLength + Buffer.byteLength(scope) + Buffer.byteLength(key);
    if (bytes > this.limits.maxBytes) return;
    this.evictions += await inTransaction(this.db, async (c) => {
      await c.query("SELECT 1 FROM result_cache_totals WHERE id = 1 FOR UPDATE");
      await this.remove(c, "scope = $1 AND key = $2", [scope, key]);
      await c.query(
        "INSERT INTO result_cache (scope, key, bytes, stored_at, used_seq, answer) VALUES ($1, $2, $3, $4, nextval('result_cache_seq'), $5)",
        [scope, key, bytes, this.now(), sealed],
      );
      await c.query("UPDATE result_cache_totals SET entries = entries + 1, bytes = bytes + $1 WHERE id = 1", [bytes]);
      return this.evict(c);
    });
  }

  async purge(scope?: string): Promise<number> {
    return inTransaction(this.db, async (c) => {
      await c.query("SELECT 1 FROM result_cache_totals WHERE id = 1 FOR UPDATE");
      return scope === undefined ? this.remove(c, "true", []) : this.remove(c, "scope = $1", [scope]);
    });
  }

  async stats(): Promise<CacheStats> {
    const { rows } = await this.db.query("SELECT entries, bytes FROM result_cache_totals WHERE id = 1");
    const t = rows[0] ?? { entries: 0, bytes: 0 };
    return { entries: Number(t.entries), bytes: Number(t.bytes), hits: this.hits, misses: this.misses, evictions: this.evictions };
  }

  async close(): Promise<void> {
    await Promise.all(this.touches);
    await this.release?.();
  }

  private miss(): undefined {
    this.misses++;
    return undefined;
  }

  /** Within a transaction: the rows `where` matches gone, and the totals with them; how many. */
  private async remove(c: pg.PoolClient, where: string, values: unknown[]): Promise<number> {
    const { rows } = await c.query(
      `WITH gone AS (DELETE FROM result_cache WHERE ${where} RETURNING bytes)
       SELECT count(*)::bigint AS n, coalesce(sum(bytes), 0)::bigint AS b FROM gone`,
      values,
    );
    const [n, b] = [Number(rows[0].n), Number(rows[0].b)];
    if (n > 0) await c.query("UPDATE result_cache_totals SET entries = entries - $1, bytes = bytes - $2 WHERE id = 1", [n, b]);
    return n;
  }

  /** Within the put's transaction (the totals locked): the least recently used gone until the bound holds, and a few aged ones. */
  private async evict(c: pg.PoolClient): Promise<number> {
    let removed = 0;
    for (;;) {
      const total = Number((await c.query("SELECT bytes FROM result_cache_totals WHERE id = 1")).rows[0].bytes);
      const oldest = await c.query("SELECT scope, key, bytes, stored_at FROM result_cache ORDER BY used_seq LIMIT $1", [EVICT_ROUND]);
      let over = total - this.limits.maxBytes;
      const victims = oldest.rows.filter((r) => {
        const aged = this.limits.ttlSeconds > 0 && this.now() - Number(r.stored_at) >= this.limits.ttlSeconds * 1000;
        if (over <= 0 && !aged) return false;
        over -= Number(r.bytes);
        return true;
      });
      // Only a prefix of the order is evicted for the bound: an aged entry behind a fresh one goes too, cheaply.
      if (victims.length === 0) return removed;
      for (const v of victims) removed += await this.remove(c, "scope = $1 AND key = $2", [v.scope, v.key]);
      if (total - this.limits.maxBytes <= 0 || oldest.rows.length < EVICT_ROUND) return removed;
    }
  }
}
