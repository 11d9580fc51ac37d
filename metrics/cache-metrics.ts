// The result cache: lines and requests answered without running (a cache hit, a repeat in flight) and those computed
// for it, by model, and the store's entries, bytes and evictions read at scrape time.
import client from "prom-client";
import { type MetricKinds, PREFIX } from "./kinds.js";

/** How the cache answered a request it could answer (a sampled request, or one with the cache off, is neither). */
export type CacheAnswer = "computed" | "duplicate" | "hit" | "bypass";

/** What the store says of itself (cache/port.ts CacheStats): the parts /metrics shows. */
export interface CacheStoreStats {
  entries: number;
  bytes: number;
  evictions: number;
}

export interface CacheMetrics {
  /** One request the caching backend answered: a hit or a duplicate counts a hit of that kind, computed a miss. */
  cacheAnswer(answer: CacheAnswer, model: string): void;
  /** The store's figures, read at scrape time. */
  watchResultCache(read: () => Promise<CacheStoreStats>): void;
}

export function createCacheMetrics(kinds: MetricKinds): CacheMetrics {
  let read: (() => Promise<CacheStoreStats>) | undefined;
  const hits = kinds.counter(
    "result_cache_hits_total",
    'Deterministic requests answered without running, by kind ("hit": the result cache held the answer; "duplicate": an identical request in flight computed it) and model.',
    ["kind", "model"],
  );
  const misses = kinds.counter(
    "result_cache_misses_total",
    "Deterministic requests the result cache could not answer, so they were computed (and their answers stored), by model.",
    ["model"],
  );
  // A store that cannot answer (a database away) shows no sample rather than failing the scrape.
  const live = async (m: { reset(): void; inc(n: number): void }, pick: (s: CacheStoreStats) => number) => {
    const s = read ? await read().catch(() => undefined) : undefined;
    m.reset();
    if (s) m.inc(pick(s));
  };
  kinds.liveGauge("result_cache_bytes", "Bytes the result cache's entries hold (keys and answers), under RESULT_CACHE_MAX_BYTES.", (g) =>
    live(g, (s) => s.bytes),
  );
  kinds.liveGauge("result_cache_entries", "Answers the result cache holds.", (g) => live(g, (s) => s.entries));
  new client.Counter({
    name: `${PREFIX}result_cache_evictions_total`,
    help: "Answers the result cache removed to stay under RESULT_CACHE_MAX_BYTES or past RESULT_CACHE_TTL, since this process opened it.",
    labelNames: [],
    registers: kinds.registers,
    collect() {
      return live(this, (s) => s.evictions);
    },
  });
  return {
    cacheAnswer(answer, model) {
      if (answer === "hit" || answer === "duplicate") hits.inc({ kind: answer, model });
      else if (answer === "computed") misses.inc({ model });
    },
    watchResultCache(r) {
      read = r;
    },
  };
}
