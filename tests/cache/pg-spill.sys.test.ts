// Large answers of the PostgreSQL result cache in the blob store, on a real PostgreSQL and an S3 protocol server
// (s3rver): stored as objects under result-cache/ with the row holding their key and checksum, read back whole, a missing or
// corrupt object a miss, and every object gone with its row (replaced, evicted, purged).
import { Readable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { blobStoreFor } from "../../app/plane-state.js";
import type { StoredAnswer } from "../../cache/port.js";
import { loadConfig } from "../../config/config.js";
import { createPool, migrate } from "../../postgres/db.js";
import { PgResultCache, SPILL_BYTES, SPILL_PREFIX } from "../../postgres/result-cache.js";
import type { BlobStore } from "../../stores/blob-store.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { type SharedState, startSharedState } from "../../testkit/shared-state.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);
const silent = pino({ level: "silent" });
let shared: SharedState;
let db: ReturnType<typeof createPool>;
let blobs: BlobStore & { close?(): void };

const answer = (text: string): StoredAnswer => ({
  body: { id: "chatcmpl-1", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: text } }] },
  usage: { promptTokens: 3, cachedTokens: 0, completionTokens: 7 },
});
const large = (c: string) => answer(c.repeat(SPILL_BYTES + 1024));
const rowOf = async (key: string) =>
  (await db.query("SELECT answer, blob_key, blob_sum FROM result_cache WHERE scope = 's' AND key = $1", [key])).rows[0];
const objects = () => blobs.list(SPILL_PREFIX);

describe.skipIf(!POSTGRES_BIN)("the PostgreSQL result cache's large answers in S3", () => {
  beforeAll(async () => {
    shared = await startSharedState();
    db = createPool(shared.env.DATABASE_URL, silent);
    await migrate(db, silent);
    const store = await blobStoreFor(loadConfig(shared.env));
    await store.ensureBucket?.();
    blobs = store;
  }, 120_000);
  afterAll(async () => {
    blobs?.close?.();
    await db?.end();
    await shared?.close();
  });
  beforeEach(async () => {
    await db.query("DELETE FROM result_cache; UPDATE result_cache_totals SET entries = 0, bytes = 0");
    await blobs.deletePrefix(SPILL_PREFIX);
  });

  const open = (maxBytes = 1 << 26) => new PgResultCache(db, { maxBytes, ttlSeconds: 0 }, Date.now, undefined, { blobs });

  it("keeps a large answer as an object (the row its key and checksum), a small one in the row, both read back whole", async () => {
    const cache = open();
    await cache.put("s", "big", large("a"));
    await cache.put("s", "small", answer("short"));
    const big = await rowOf("big");
    expect(big.answer).toBeNull();
    expect(big.blob_key).toMatch(new RegExp(`^${SPILL_PREFIX}`));
    expect(big.blob_sum).toHaveLength(32);
    expect(await objects()).toEqual([big.blob_key]);
    expect((await rowOf("small")).blob_key).toBeNull();
    expect(await cache.get("s", "big")).toEqual(large("a"));
    // Another worker's cache on the same table and bucket reads it too.
    expect(await open().get("s", "big")).toEqual(large("a"));
    expect(await cache.get("s", "small")).toEqual(answer("short"));
  });

  it("a missing or corrupt object is a miss, and its row goes", async () => {
    const cache = open();
    await cache.put("s", "gone", large("g"));
    await cache.put("s", "bent", large("b"));
    await blobs.delete((await rowOf("gone")).blob_key);
    const bent = (await rowOf("bent")).blob_key;
    const bytes = Buffer.from(JSON.stringify(large("c")));
    await blobs.put(bent, Readable.from([bytes]));
    expect(await cache.get("s", "gone")).toBeUndefined();
    expect(await cache.get("s", "bent")).toBeUndefined();
    expect(await rowOf("gone")).toBeUndefined();
    expect(await rowOf("bent")).toBeUndefined();
    expect(await objects()).toEqual([]);
    expect((await cache.stats()).entries).toBe(0);
  });

  it("an answer replaced, evicted or purged takes its object with it", async () => {
    const size = Buffer.byteLength(JSON.stringify(large("x"))) + 100;
    const cache = open(2 * size + 200);
    await cache.put("s", "k1", large("a"));
    const first = (await rowOf("k1")).blob_key;
    await cache.put("s", "k1", large("b"));
    expect(await objects()).not.toContain(first);
    expect(await objects()).toHaveLength(1);
    await cache.put("s", "k2", large("c"));
    await cache.put("s", "k3", large("d"));
    expect(await cache.get("s", "k1")).toBeUndefined();
    expect(await objects()).toHaveLength(2);
    expect((await cache.stats()).evictions).toBeGreaterThanOrEqual(1);
    expect(await cache.purge()).toBe(2);
    expect(await objects()).toEqual([]);
  });
});
