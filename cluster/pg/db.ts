// PostgreSQL: the connection pool and the schema, created and migrated at start from the versioned SQL files in
// cluster/migrations (applied in name order, each once, in its own transaction, under an advisory lock so that
// processes starting together do not race).
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import type pino from "pino";

export const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations");

/** Advisory lock keys (one namespace for this service). */
export const LOCKS = { migrate: 7_240_001, maintenance: 7_240_002, admission: 7_240_003 } as const;

export function createPool(url: string, logger: pino.Logger, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max, connectionTimeoutMillis: 5_000 });
  // An idle client losing its connection (a database restart) must not crash the process: the pool replaces it.
  pool.on("error", (err) => logger.warn({ err: err.message }, "database connection lost; it is reopened on next use"));
  return pool;
}

export async function migrate(pool: pg.Pool, logger: pino.Logger): Promise<string[]> {
  const client = await pool.connect();
  try {
    await client.query("SELECT pg_advisory_lock($1)", [LOCKS.migrate]);
    await client.query(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    const done = new Set((await client.query("SELECT version FROM schema_migrations")).rows.map((r) => r.version as string));
    const applied: string[] = [];
    for (const file of readdirSync(MIGRATIONS_DIR)
      .filter((f) => f.endsWith(".sql"))
      .sort()) {
      const version = file.replace(/\.sql$/, "");
      if (done.has(version)) continue;
      await client.query("BEGIN");
      try {
        await client.query(readFileSync(path.join(MIGRATIONS_DIR, file), "utf8"));
        await client.query("INSERT INTO schema_migrations (version) VALUES ($1)", [version]);
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK");
        throw new Error(`database migration ${file} failed: ${(err as Error).message}`);
      }
      applied.push(version);
    }
    if (applied.length > 0) logger.info({ applied }, "database schema migrated");
    return applied;
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [LOCKS.migrate]).catch(() => undefined);
    client.release();
  }
}

/** Runs `work` in one transaction. */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
