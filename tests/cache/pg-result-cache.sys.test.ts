// The result cache in PostgreSQL (a real throwaway server) held to the ResultCache contract, and shared: what one
// worker's cache stores another's answers.
import type pg from "pg";
import pino from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createPool, migrate } from "../../postgres/db.js";
import { PgResultCache } from "../../postgres/result-cache.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE, startPostgres, type TestPostgres } from "../../testkit/postgres.js";
import { resultCacheContract } from "./result-cache-contract.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);
const silent = pino({ level: "silent" });
let server: TestPostgres | undefined;
let db: pg.Pool | undefined;

beforeAll(async () => {
  if (!POSTGRES_BIN) return;
  server = await startPostgres();
  db = createPool(server.url, silent);
  await migrate(db, silent);
}, 60_000);
afterAll(async () => {
  await db?.end();
  server?.destroy();
});

resultCacheContract("PostgreSQL", !POSTGRES_BIN, () => ({
  async fresh() {
    await db!.query("DELETE FROM result_cache; UPDATE result_cache_totals SET entries = 0, bytes = 0");
  },
  async open(limits, now) {
    return new PgResultCache(db!, limits, now);
  },
  async corrupt(scope, key) {
    await db!.query(
      "UPDATE result_cache SET answer = set_byte(answer, length(answer) - 2, 255 - get_byte(answer, length(answer) - 2)) WHERE scope = $1 AND key = $2",
      [scope, key],
    );
  },
}));

it.skipIf(!POSTGRES_BIN)("shares answers between the caches of two workers", async () => {
  const limits = { maxBytes: 1 << 24, ttlSeconds: 0 };
  const [a, b] = [new PgResultCache(db!, limits), new PgResultCache(db!, limits)];
  const answer = {
    body: { id: "cmpl-1", choices: [{ index: 0, text: "shared" }] },
    usage: { promptTokens: 1, completionTokens: 1, cachedTokens: 0 },
  };
  await a.put("open", "k-shared", answer);
  expect(await b.get("open", "k-shared")).toEqual(answer);
  await Promise.all([a.close(), b.close()]);
});
