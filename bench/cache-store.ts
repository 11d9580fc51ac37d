// The result cache's stores alone, in a process of their own: the embedded (LMDB) store filled through the
// ResultCache port with synthetic answers, this process's resident memory at each count of answers held, and lookups
// per second of the embedded and PostgreSQL stores (a throwaway cluster from testkit). Prints one JSON object.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import v8 from "node:v8";
import { runInNewContext } from "node:vm";
import pino from "pino";
import { LmdbResultCache } from "../cache/lmdb-cache.js";
import type { ResultCache, StoredAnswer } from "../cache/port.js";
import { createPool, migrate } from "../postgres/db.js";
import { PgResultCache } from "../postgres/result-cache.js";
import { POSTGRES_BIN, startPostgres } from "../testkit/postgres.js";
import { readMemory } from "./proc-stats.js";

export interface StoreRss {
  entries: number;
  rssMiB: number;
  /** Of which anonymous memory (the process's own) and file pages (LMDB's map: the page cache, which the kernel reclaims). */
  anonMiB: number;
  fileMiB: number;
  /** V8's heap in use: what the process itself holds, apart from LMDB's mapped pages. */
  heapMiB: number;
  fillSeconds: number;
}

export interface StoreLookups {
  store: "embedded" | "postgres";
  entries: number;
  lookups: number;
  perSecond: number;
  /** Lookups that found no answer: there should be none. */
  misses: number;
}

export interface CacheStoreResult {
  rss: StoreRss[];
  lookups: StoreLookups[];
  note?: string;
}

v8.setFlagsFromString("--expose-gc");
/** A full collection before each sample, so the resident set is what stays. */
const gc = runInNewContext("gc") as () => void;

const SCOPE = "bench";
/** Puts in flight at once: LMDB commits the ones that wait together. */
const PUTS_IN_FLIGHT = 512;
const LOOKUPS_IN_FLIGHT = 32;

const keyOf = (i: number) => createHash("sha256").update(`request ${i}`).digest("hex");

/** A chat completion's answer of about 400 bytes, as the caching backend stores it. */
function answerOf(i: number): StoredAnswer {
  return {
    body: {
      id: `chatcmpl-${i}`,
      object: "chat.completion",
      created: 1_764_000_000,
      model: "small",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: `The answer to request ${i} is a short sentence of a few words.` },
          finish_reason: "stop",
        },
      ],
      usage: { prompt_tokens: 24, completion_tokens: 16, total_tokens: 40 },
    },
    usage: { promptTokens: 24, cachedTokens: 0, completionTokens: 16 },
    stops: [null],
  };
}

async function fill(cache: ResultCache, from: number, to: number): Promise<void> {
  for (let i = from; i < to; i += PUTS_IN_FLIGHT) {
    const chunk: Promise<void>[] = [];
    for (let j = i; j < Math.min(to, i + PUTS_IN_FLIGHT); j++) chunk.push(cache.put(SCOPE, keyOf(j), answerOf(j)));
    await Promise.all(chunk);
  }
}

/** `lookups` gets of answers held (picked by a fixed stride over them), some in flight at once. */
async function lookups(store: StoreLookups["store"], cache: ResultCache, entries: number, count: number): Promise<StoreLookups> {
  let misses = 0;
  const started = performance.now();
  for (let i = 0; i < count; i += LOOKUPS_IN_FLIGHT) {
    const chunk: Promise<unknown>[] = [];
    for (let j = i; j < Math.min(count, i + LOOKUPS_IN_FLIGHT); j++)
      chunk.push(cache.get(SCOPE, keyOf((j * 7919) % entries)).then((a) => (a ? undefined : misses++)));
    await Promise.all(chunk);
  }
  const seconds = (performance.now() - started) / 1000;
  return { store, entries, lookups: count, perSecond: count / seconds, misses };
}

/** RssAnon and RssFile of this process, MiB (Linux). */
function residentKinds(): { anonMiB: number; fileMiB: number } {
  const text = readFileSync("/proc/self/status", "utf8");
  const mib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? Number.NaN) / 1024;
  return { anonMiB: mib("RssAnon"), fileMiB: mib("RssFile") };
}

const limits = { maxBytes: 2 ** 40, ttlSeconds: 0 };

/** The embedded store filled to each count in turn, the resident set after each (after a collection), then lookups. */
async function embedded(counts: number[], count: number): Promise<{ rss: StoreRss[]; lookups: StoreLookups }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "obi-bench-cache-store-"));
  const cache = new LmdbResultCache(path.join(dir, "answers"), limits);
  try {
    const rss: StoreRss[] = [];
    let held = 0;
    for (const entries of counts) {
      const t0 = performance.now();
      await fill(cache, held, entries);
      held = entries;
      gc();
      const m = readMemory();
      rss.push({
        entries,
        rssMiB: (m?.rss ?? Number.NaN) / 2 ** 20,
        ...residentKinds(),
        heapMiB: process.memoryUsage().heapUsed / 2 ** 20,
        fillSeconds: (performance.now() - t0) / 1000,
      });
    }
    return { rss, lookups: await lookups("embedded", cache, held, count) };
  } finally {
    await cache.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function postgres(entries: number, count: number): Promise<StoreLookups> {
  const server = await startPostgres();
  const silent = pino({ level: "silent" });
  const db = createPool(server.url, silent);
  try {
    await migrate(db, silent);
    const cache = new PgResultCache(db, limits);
    await fill(cache, 0, entries);
    const r = await lookups("postgres", cache, entries, count);
    await cache.close();
    return r;
  } finally {
    await db.end();
    server.destroy();
  }
}

const { values } = parseArgs({
  options: {
    counts: { type: "string", default: "10000,1000000" },
    lookups: { type: "string", default: "20000" },
    "pg-entries": { type: "string", default: "10000" },
  },
});
const counts = values.counts.split(",").map(Number);
const count = Number(values.lookups);
const result: CacheStoreResult = { rss: [], lookups: [] };
const e = await embedded(counts, count);
result.rss = e.rss;
result.lookups.push(e.lookups);
if (POSTGRES_BIN) result.lookups.push(await postgres(Number(values["pg-entries"]), count));
else result.note = "PostgreSQL is not installed here: its store's lookups were skipped.";
console.log(JSON.stringify(result));
