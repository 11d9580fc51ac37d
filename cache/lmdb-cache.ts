// The embedded ResultCache: an LMDB environment in a folder beside BATCH_DIR (BATCH_DIR/cache/), its answers
// sealed with their checksum, its byte bound kept by a least-recently-used index in the same transactions as the
// entries, so the bound and the entries never disagree after a crash.
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import type { Database, RootDatabase } from "lmdb";
import { checkBeforeOpen, LMDB_OPTIONS, markOpen, unmarkOpen } from "./lmdb-check.js";
import {
  type CacheStats,
  checkScopeAndKey,
  openAnswer,
  type ResultCache,
  type ResultCacheLimits,
  type StoredAnswer,
  sealAnswer,
} from "./port.js";

// Its CommonJS build, one file, rather than its ES modules and theirs: a process that only reads the cache (a
// dataset job run again) starts 20 ms sooner.
const { open } = createRequire(import.meta.url)("lmdb") as typeof import("lmdb");

interface EntryMeta {
  /** Its place in the least-recently-used order: higher is more recent. */
  seq: number;
  bytes: number;
  /** When it was stored (ms since the epoch): its age for the TTL. */
  at: number;
  /** When a read last made it the most recent (ms since the epoch); absent: never since it was stored. */
  used?: number;
}

interface Totals {
  entries: number;
  bytes: number;
  seq: number;
}

const TOTALS = "totals";
/** Expired entries removed at most per put, oldest first, so a put costs little however many have aged. */
const SWEEP_PER_PUT = 16;
/**
 * A read makes its entry the most recent at most this often, as memcached bumps an item at most once a minute: a
 * minute is nothing to an order that evicts over days, and a move costs four writes. A batch run again at once, or a
 * line repeated within it, reads without writing.
 */
const RECENT_FOR_MS = 60_000;

const entryKey = (scope: string, key: string) => `${scope}\u0000${key}`;

/** Whether the process already leaves lmdb's own rejections of a failed commit alone. */
let commitFailuresGuarded = false;

/** lmdb's write code in a stack: its ES module, or the commit functions of the CommonJS bundle this file loads. */
const LMDB_WRITE = /[\\/]lmdb[\\/]write\.js|\b(?:rejectCommit|resolveWrites) \([^)]*[\\/]lmdb[\\/]dist[\\/]index\.cjs/;

/** Whether an unhandled rejection is one of lmdb's own for a commit that failed (guardCommitFailures). */
export const isLmdbCommitFailure = (reason: unknown): boolean => reason instanceof Error && LMDB_WRITE.test(reason.stack ?? "");

/**
 * When a commit fails (a full or read-only disk), lmdb (3.5.6) rejects the caller's promise, which a put turns into a
 * miss, and also promises of its own that nothing can await: each would end the process. Those, recognised by
 * lmdb's write code in their stack, are dropped here; any other unhandled rejection still ends the process, as
 * Node's default does.
 */
function guardCommitFailures(): void {
  if (commitFailuresGuarded) return;
  commitFailuresGuarded = true;
  process.on("unhandledRejection", (reason) => {
    if (isLmdbCommitFailure(reason)) return;
    throw reason;
  });
}

export class LmdbResultCache implements ResultCache {
  private readonly root: RootDatabase;
  private readonly meta: Database<EntryMeta, string>;
  private readonly data: Database<Buffer, string>;
  private readonly lru: Database<string, number>;
  private readonly sums: Database<Totals, string>;
  private hits = 0;
  private misses = 0;
  private evictions = 0;
  /** Recency updates of hits, not awaited by the reader: a close waits for them. */
  private readonly touches = new Set<Promise<unknown>>();
  /** Entries read since the last recency update was begun: one transaction makes them all recent. */
  private readonly toTouch = new Set<string>();
  /** Why the environment was found unreadable and started again empty (lmdb-check.ts), if it was. */
  readonly damaged: string | undefined;

  constructor(
    private readonly dir: string,
    private readonly limits: ResultCacheLimits,
    private readonly now: () => number = Date.now,
  ) {
    this.damaged = checkBeforeOpen(dir);
    mkdirSync(dir, { recursive: true });
    guardCommitFailures();
    this.root = open({ path: dir, ...LMDB_OPTIONS });
    markOpen(dir);
    this.meta = this.root.openDB({ name: "meta" });
    this.data = this.root.openDB({ name: "data", encoding: "binary" });
    this.lru = this.root.openDB({ name: "lru" });
    this.sums = this.root.openDB({ name: "sums" });
  }

  async get(scope: string, key: string): Promise<StoredAnswer | undefined> {
    checkScopeAndKey(scope, key);
    const k = entryKey(scope, key);
    const meta = this.meta.get(k);
    if (!meta) return this.miss();
    if (this.expired(meta)) {
      await this.write(() => this.removeEntry(k));
      this.evictions++;
      return this.miss();
    }
    const answer = openAnswer(this.data.get(k));
    if (!answer) {
      await this.write(() => this.removeEntry(k));
      return this.miss();
    }
    this.hits++;
    if (this.stale(meta)) this.touchSoon(k);
    return answer;
  }

  /** A read-only get: an entry fresh and whole, with no hit counted, no recency refreshed and nothing removed. */
  async has(scope: string, key: string): Promise<boolean> {
    checkScopeAndKey(scope, key);
    const k = entryKey(scope, key);
    const meta = this.meta.get(k);
    return meta !== undefined && !this.expired(meta) && openAnswer(this.data.get(k)) !== undefined;
  }

  async put(scope: string, key: string, answer: StoredAnswer): Promise<void> {
    checkScopeAndKey(scope, key);
    const k = entryKey(scope, key);
    const sealed = sealAnswer(answer);
    const bytes = sealed.byteLength + Buffer.byteLength(k);
    // An answer larger than the whole bound is not kept: it would evict everything and then itself.
    if (bytes > this.limits.maxBytes) return;
    // Resolved once committed, which is flushed (LMDB_OPTIONS: no overlapping sync): a line that waits for it is durable.
    const evicted = await this.write(() => {
      // What was read before this put is more recent than what it evicts.
      this.touchRead();
      this.removeEntry(k);
      const t = this.totals();
      const seq = t.seq + 1;
      this.data.putSync(k, sealed);
      this.meta.putSync(k, { seq, bytes, at: this.now() });
      this.lru.putSync(seq, k);
      this.sums.putSync(TOTALS, { entries: t.entries + 1, bytes: t.bytes + bytes, seq });
      return this.evict();
    });
    this.evictions += evicted;
  }

  async purge(scope?: string): Promise<number> {
    if (scope === undefined) {
      const n = this.totals().entries;
      await this.write(() => {
        for (const db of [this.meta, this.data, this.lru] as Database<unknown, never>[]) db.clearSync();
        this.sums.putSync(TOTALS, { entries: 0, bytes: 0, seq: this.totals().seq });
      });
      return n;
    }
    return this.write(() => {
      const keys = [...this.meta.getKeys({ start: entryKey(scope, ""), end: `${scope}\u0001` })];
      for (const k of keys) this.removeEntry(k);
      return keys.length;
    });
  }

  async stats(): Promise<CacheStats> {
    const t = this.totals();
    return { entries: t.entries, bytes: t.bytes, hits: this.hits, misses: this.misses, evictions: this.evictions };
  }

  async close(): Promise<void> {
    await Promise.all(this.touches);
    await this.root.close();
    unmarkOpen(this.dir);
  }

  private miss(): undefined {
    this.misses++;
    return undefined;
  }

  /**
   * A write transaction. A failed commit (a full or read-only disk) rejects the caller's promise only: lmdb also
   * rejects a promise of its own (the error's commitError) that nobody awaits, which would end the process.
   */
  private async write<T>(work: () => T): Promise<T> {
    try {
      return await this.root.transaction(work);
    } catch (err) {
      (err as { commitError?: Promise<unknown> }).commitError?.catch(() => undefined);
      throw err;
    }
  }

  private expired(meta: EntryMeta): boolean {
    return this.limits.ttlSeconds > 0 && this.now() - meta.at >= this.limits.ttlSeconds * 1000;
  }

  private totals(): Totals {
    return this.sums.get(TOTALS) ?? { entries: 0, bytes: 0, seq: 0 };
  }

  /** Within a write transaction: the entry gone from the three tables and the totals. */
  private removeEntry(k: string): boolean {
    const meta = this.meta.get(k);
    if (!meta) return false;
    this.meta.removeSync(k);
    this.data.removeSync(k);
    this.lru.removeSync(meta.seq);
    const t = this.totals();
    this.sums.putSync(TOTALS, { entries: t.entries - 1, bytes: t.bytes - meta.bytes, seq: t.seq });
    return true;
  }

  /** Whether a read entry was stored or made recent long enough ago to be made recent again. */
  private stale(meta: EntryMeta): boolean {
    return this.now() - (meta.used ?? meta.at) >= RECENT_FOR_MS;
  }

  /** The entry made recent in the next recency transaction, which the reads until the next turn of the loop share. */
  private touchSoon(k: string): void {
    if (this.toTouch.size === 0) {
      const touch = new Promise((tick) => setImmediate(tick))
        .then(() => (this.toTouch.size > 0 ? this.write(() => this.touchRead()) : undefined))
        .catch(() => undefined);
      this.touches.add(touch);
      void touch.finally(() => this.touches.delete(touch));
    }
    this.toTouch.add(k);
  }

  /** Within a write transaction: the entries read since the last one made the most recently used. */
  private touchRead(): void {
    const keys = [...this.toTouch];
    this.toTouch.clear();
    for (const key of keys) this.touch(key);
  }

  /** Within a write transaction: the entry made the most recently used (gone since the read: nothing). */
  private touch(k: string): void {
    const meta = this.meta.get(k);
    if (!meta || !this.stale(meta)) return;
    const t = this.totals();
    const seq = t.seq + 1;
    this.lru.removeSync(meta.seq);
    this.lru.putSync(seq, k);
    this.meta.putSync(k, { ...meta, seq, used: this.now() });
    this.sums.putSync(TOTALS, { ...t, seq });
  }

  /** Within a write transaction: the least recently used entries removed past the bound, and a few aged ones. */
  private evict(): number {
    let removed = 0;
    for (let swept = 0; ; ) {
      const [oldest] = [...this.lru.getRange({ limit: 1, snapshot: false })];
      if (!oldest) return removed;
      const meta = this.meta.get(oldest.value);
      const aged = meta !== undefined && swept < SWEEP_PER_PUT && this.expired(meta);
      if (!aged && this.totals().bytes <= this.limits.maxBytes) return removed;
      if (aged) swept++;
      if (this.removeEntry(oldest.value)) removed++;
      // An index row without its entry (none is written so; a torn copy of the folder): dropped, not looped on.
      else this.lru.removeSync(oldest.key);
    }
  }
}
