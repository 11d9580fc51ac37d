// The ResultCache in PostgreSQL, shared by every worker of the distributed mode: one table of sealed answers in
// least-recently-used order, and one row of totals that every write locks, so the byte bound holds across workers.
// Lookups and stores each go in groups: one query (or transaction) for those that arrived while the last one ran.
// An answer over SPILL_BYTES is an object of the blob store (S3 in the distributed mode) under result-cache/, its row
// holding the object's key and checksum; a missing or corrupt object is a miss.
import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";
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
import type { BlobStore } from "../stores/blob-store.js";
import { type Db, inTransaction } from "./db.js";

/** Oldest entries looked at per round of eviction. */
const EVICT_ROUND = 64;

/** Sealed answers larger than this go to the blob store, not into the row. */
export const SPILL_BYTES = 64 * 1024;
/** Where in the blob store spilled answers live. */
export const SPILL_PREFIX = "result-cache/";

/** The blob store large answers go to, and from what size (default SPILL_BYTES). */
export interface CacheSpill {
  blobs: BlobStore;
  overBytes?: number;
}

/** Puts written in one transaction at most. */
const PUT_GROUP = 256;
/** Gets read in one query at most. */
const READ_GROUP = 256;

/** What a get reads of an entry's row. */
interface CacheRow {
  answer: Buffer | null;
  blob_key: string | null;
  blob_sum: Buffer | null;
  stored_at: string | number;
}

type FoundRow = CacheRow & { scope: string; key: string };

interface PendingRead {
  scope: string;
  key: string;
  resolve: (row: CacheRow | undefined) => void;
  reject: (err: unknown) => void;
}

interface PendingPut {
  scope: string;
  key: string;
  bytes: number;
  sealed: Buffer;
  object?: string;
  resolve: () => void;
  reject: (err: unknown) => void;
}

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest();
/** One entry's scope and key as one string, to match rows with what was asked. */
const entryOf = (e: { scope: string; key: string }) => `${e.scope}\u0000${e.key}`;

export class PgResultCache implements ResultCache {
  readonly remote = true;
  private hits = 0;
  private misses = 0;
  private evictions = 0;
  private readonly touches = new Set<Promise<unknown>>();
  private readonly pending: PendingPut[] = [];
  private flushing: Promise<void> | undefined;
  private readonly reads: PendingRead[] = [];
  private reading: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    private readonly limits: ResultCacheLimits,
    private readonly now: () => number = Date.now,
    /** What closes the connections when the cache has its own (the pool is otherwise the caller's). */
    private readonly release?: () => Promise<void>,
    private readonly spill?: CacheSpill,
  ) {}

  async get(scope: string, key: string): Promise<StoredAnswer | undefined> {
    checkScopeAndKey(scope, key);
    const row = await new Promise<CacheRow | undefined>((resolve, reject) => {
      this.reads.push({ scope, key, resolve, reject });
      this.reading ??= this.readAll();
    });
    if (!row) return this.miss();
    const expired = this.limits.ttlSeconds > 0 && this.now() - Number(row.stored_at) >= this.limits.ttlSeconds * 1000;
    const answer = expired ? undefined : openAnswer(await this.sealedOf(row));
    if (!answer) {
      await this.removing((c, gone) => this.remove(c, "scope = $1 AND key = $2", [scope, key], gone));
      if (expired) this.evictions++;
      return this.miss();
    }
    this.hits++;
    return answer;
  }

  /**
   * Reads what was asked for, a query per group, one group at a time: the gets of a busy batch's lines that arrive
   * during one read share the next, rather than each line taking a round trip of its own. The rows a group found
   * are made recent in one statement, not awaited (a close waits for it).
   */
  private async readAll(): Promise<void> {
    // Gets asked in the same turn join the first group.
    await Promise.resolve();
    while (this.reads.length > 0) {
      const group = this.reads.splice(0, READ_GROUP);
      try {
        const { rows } = await this.db.query(
          `SELECT scope, key, answer, blob_key, blob_sum, stored_at FROM result_cache
           WHERE (scope, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
          [group.map((r) => r.scope), group.map((r) => r.key)],
        );
        const found = new Map((rows as FoundRow[]).map((r) => [entryOf(r), r]));
        for (const r of group) r.resolve(found.get(entryOf(r)));
        if (rows.length > 0) this.touch(rows);
      } catch (err) {
        for (const r of group) r.reject(err);
      }
    }
    this.reading = undefined;
  }

  /** The rows read made the most recently used, in the order read. */
  private touch(rows: Array<{ scope: string; key: string }>): void {
    const touch = this.db
      .query(
        `UPDATE result_cache SET used_seq = nextval('result_cache_seq')
         WHERE (scope, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
        [rows.map((r) => r.scope), rows.map((r) => r.key)],
      )
      .catch(() => undefined);
    this.touches.add(touch);
    void touch.finally(() => this.touches.delete(touch));
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
    // The object first, under a name of its own: a row never names an object that was not whole when it was written.
    const object = this.spill && sealed.byteLength > (this.spill.overBytes ?? SPILL_BYTES) ? await this.putObject(sealed) : undefined;
    await new Promise<void>((resolve, reject) => {
      this.pending.push({ scope, key, bytes, sealed, object, resolve, reject });
      this.flushing ??= this.flush();
    });
  }

  /**
   * Writes what was put, a transaction per group, one group at a time: every write locks the totals row (the bound
   * holds across workers), so the puts that arrived during one transaction share the next (a group commit), rather
   * than each line of a busy batch taking its turn at the lock.
   */
  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      // Reads made recent before this put are so when it evicts: the touch is not awaited by the get, but is here.
      await Promise.all(this.touches);
      const group = this.pending.splice(0, PUT_GROUP);
      try {
        this.evictions += await this.removing((c, gone) => this.writeGroup(c, group, gone));
        for (const p of group) p.resolve();
      } catch (err) {
        for (const p of group) {
          if (p.object) await this.spill?.blobs.delete(p.object).catch(() => undefined);
          p.reject(err);
        }
      }
    }
    this.flushing = undefined;
  }

  /** Within a transaction: the group's entries replace any under the same keys, the totals follow, the bound is kept. */
  private async writeGroup(c: pg.PoolClient, group: PendingPut[], gone: string[]): Promise<number> {
    // The last put of a key in the group is the one kept, as if they had been written one after the other.
    const last = [...new Map(group.map((p) => [entryOf(p), p])).values()];
    const scopes = last.map((p) => p.scope);
    const keys = last.map((p) => p.key);
    await c.query("SELECT 1 FROM result_cache_totals WHERE id = 1 FOR UPDATE");
    await this.remove(c, "(scope, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))", [scopes, keys], gone);
    await c.query(
      `INSERT INTO result_cache (scope, key, bytes, stored_at, used_seq, answer, blob_key, blob_sum)
       SELECT s, k, b, $4, nextval('result_cache_seq'), a, o, h
       FROM unnest($1::text[], $2::text[], $3::bigint[], $5::bytea[], $6::text[], $7::bytea[]) AS t(s, k, b, a, o, h)`,
      [
        scopes,
        keys,
        last.map((p) => p.bytes),
        this.now(),
        last.map((p) => (p.object ? null : p.sealed)),
        last.map((p) => p.object ?? null),
        last.map((p) => (p.object ? sha256(p.sealed) : null)),
      ],
    );
    const bytes = last.reduce((n, p) => n + p.bytes, 0);
    const { rows } = await c.query(
      "UPDATE result_cache_totals SET entries = entries + $1, bytes = bytes + $2 WHERE id = 1 RETURNING bytes",
      [last.length, bytes],
    );
    // Objects of puts the group replaced before they were written are no row's: gone with the rest.
    for (const p of group) if (p.object && !last.includes(p)) gone.push(p.object);
    // Under the bound with no age limit, nothing is evicted: the transaction, which holds every writer's lock, ends here.
    if (Number(rows[0].bytes) <= this.limits.maxBytes && !(this.limits.ttlSeconds > 0)) return 0;
    return this.evict(c, gone);
  }

  async purge(scope?: string): Promise<number> {
    return this.removing(async (c, gone) => {
      await c.query("SELECT 1 FROM result_cache_totals WHERE id = 1 FOR UPDATE");
      return scope === undefined ? this.remove(c, "true", [], gone) : this.remove(c, "scope = $1", [scope], gone);
    });
  }

  async stats(): Promise<CacheStats> {
    const { rows } = await this.db.query("SELECT entries, bytes FROM result_cache_totals WHERE id = 1");
    const t = rows[0] ?? { entries: 0, bytes: 0 };
    return { entries: Number(t.entries), bytes: Number(t.bytes), hits: this.hits, misses: this.misses, evictions: this.evictions };
  }

  async close(): Promise<void> {
    await this.reading;
    await this.flushing;
    await Promise.all(this.touches);
    await this.release?.();
  }

  private miss(): undefined {
    this.misses++;
    return undefined;
  }

  /** A transaction that removes rows, then (committed) the objects of the removed rows it collected in `gone`. */
  private async removing<T>(work: (c: pg.PoolClient, gone: string[]) => Promise<T>): Promise<T> {
    const gone: string[] = [];
    const result = await inTransaction(this.db, (c) => work(c, gone));
    // An object left by a failed delete is an orphan under result-cache/, never an answer: no row names it.
    await Promise.all(gone.map((k) => this.spill?.blobs.delete(k).catch(() => undefined)));
    return result;
  }

  private async putObject(sealed: Buffer): Promise<string> {
    const name = `${SPILL_PREFIX}${randomBytes(16).toString("hex")}`;
    await this.spill!.blobs.put(name, Readable.from([sealed]));
    return name;
  }

  /** A row's sealed answer: its column, or its object whose bytes match the row's checksum (else undefined). */
  private async sealedOf(row: CacheRow): Promise<Buffer | undefined> {
    if (!row.blob_key) return row.answer ?? undefined;
    const blobs = this.spill?.blobs;
    const opened = await blobs?.open(row.blob_key).catch(() => undefined);
    if (!opened || !row.blob_sum) return undefined;
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of opened.content) chunks.push(chunk as Buffer);
    } catch {
      return undefined;
    }
    const bytes = Buffer.concat(chunks);
    return sha256(bytes).equals(row.blob_sum) ? bytes : undefined;
  }

  /** Within a transaction: the rows `where` matches gone (their objects' keys added to `gone`), and the totals with them; how many. */
  private async remove(c: pg.PoolClient, where: string, values: unknown[], gone: string[]): Promise<number> {
    const { rows } = await c.query(
      `WITH gone AS (DELETE FROM result_cache WHERE ${where} RETURNING bytes, blob_key)
       SELECT count(*)::bigint AS n, coalesce(sum(bytes), 0)::bigint AS b,
              coalesce(array_agg(blob_key) FILTER (WHERE blob_key IS NOT NULL), '{}') AS keys FROM gone`,
      values,
    );
    gone.push(...(rows[0].keys as string[]));
    const [n, b] = [Number(rows[0].n), Number(rows[0].b)];
    if (n > 0) await c.query("UPDATE result_cache_totals SET entries = entries - $1, bytes = bytes - $2 WHERE id = 1", [n, b]);
    return n;
  }

  /** Within the put's transaction (the totals locked): the least recently used gone until the bound holds, and a few aged ones. */
  private async evict(c: pg.PoolClient, gone: string[]): Promise<number> {
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
      for (const v of victims) removed += await this.remove(c, "scope = $1 AND key = $2", [v.scope, v.key], gone);
      if (total - this.limits.maxBytes <= 0 || oldest.rows.length < EVICT_ROUND) return removed;
    }
  }
}
