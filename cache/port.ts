// The ResultCache port: answers remembered by scope and key, bounded in bytes (least recently used go first) and in
// age, each stored with its checksum so a corrupt or cut entry reads as a miss, never as a wrong answer. Two
// implementations: cache/lmdb-cache.ts (embedded, beside BATCH_DIR) and postgres/result-cache.ts (shared by workers).
import type { TokenUsage } from "../openai/backend.js";
import { sha256 } from "./digest.js";

/** What a backend answered, as it is remembered: the body as it was sent, its usage and its stops. */
export interface StoredAnswer {
  body: Record<string, unknown>;
  usage: TokenUsage;
  stops?: Array<string | null>;
}

export interface CacheStats {
  /** Entries and their bytes (key and stored answer) held now. */
  entries: number;
  bytes: number;
  /** Since this process opened the cache. */
  hits: number;
  misses: number;
  /** Entries removed to stay under the byte bound, or past their age. */
  evictions: number;
}

export interface ResultCacheLimits {
  /** The bytes entries may hold together; the least recently used go first past it. */
  maxBytes: number;
  /** Seconds an entry is answered from after it is stored (0: no bound). */
  ttlSeconds: number;
}

export interface ResultCache {
  /**
   * Its commits cross a network (PostgreSQL's): a line waits longer for its answer's store than on a local flush,
   * and a run keeps more lines in flight over it (pipeline/run-batch.ts).
   */
  readonly remote?: boolean;
  /**
   * The answer stored under (scope, key), fresh and whole; undefined on a miss (absent, expired, corrupt). Each call's
   * answer is its caller's own object, which it may change.
   */
  get(scope: string, key: string): Promise<StoredAnswer | undefined>;
  /**
   * Whether (scope, key) holds a fresh, whole answer, read without counting a hit or refreshing its recency (a plan
   * asks). Absent: a store answers it by get.
   */
  has?(scope: string, key: string): Promise<boolean>;
  /**
   * Stores an answer, replacing one under the same (scope, key), and evicts what the bound no longer holds. Resolves
   * once the answer is durable: a store reopened after a crash holds it.
   */
  put(scope: string, key: string, answer: StoredAnswer): Promise<void>;
  /** Removes a scope's entries, or every entry: how many. */
  purge(scope?: string): Promise<number>;
  stats(): Promise<CacheStats>;
  close(): Promise<void>;
}

const SUM_BYTES = 32;

/** An answer as stored: the sha256 of its JSON, then the JSON. */
export function sealAnswer(answer: StoredAnswer): Buffer {
  const json = Buffer.from(JSON.stringify(answer), "utf8");
  return Buffer.concat([sha256(json), json]);
}

/** The answer of a sealed entry, or undefined when its checksum does not hold (a torn write, a flipped byte). */
export function openAnswer(sealed: Uint8Array | undefined | null): StoredAnswer | undefined {
  if (!sealed || sealed.byteLength <= SUM_BYTES) return undefined;
  const buf = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
  const json = buf.subarray(SUM_BYTES);
  if (!sha256(json).equals(buf.subarray(0, SUM_BYTES))) return undefined;
  try {
    const a = JSON.parse(json.toString("utf8")) as StoredAnswer;
    return a && typeof a.body === "object" && a.body !== null && typeof a.usage === "object" ? a : undefined;
  } catch {
    return undefined;
  }
}

/** A scope or key is text without the separator the stores join them with. */
export function checkScopeAndKey(scope: string, key: string): void {
  if (scope.includes("\u0000") || key.includes("\u0000") || scope.length === 0 || key.length === 0)
    throw new Error("a result cache scope and key are non-empty and hold no NUL");
}
