// PostgreSQL: the connection pool and the schema, created and migrated at start from the versioned SQL files in
// postgres/migrations (applied in name order, each once, in its own transaction, under an advisory lock so that
// processes starting together do not race).
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import type pino from "pino";
import { databaseUnavailable } from "../domain/errors.js";
import { OutageLog } from "../state/outage-log.js";

export const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations");

/** Advisory lock keys (one namespace for this service; 7_240_002 was the maintenance's before it became a lease). */
export const LOCKS = { migrate: 7_240_001, admission: 7_240_003 } as const;

/**
 * Bounds on every conversation with the database, so that a reply that never comes (a partition, a frozen server)
 * fails the call instead of hanging it: the server cancels a statement after STATEMENT_MS, the client gives up on
 * a reply after QUERY_MS (the pool then drops that connection), and TCP keepalive finds a dead peer within about
 * a minute where a connection sits idle.
 */
export const DB_TIMEOUTS = { connectMs: 5_000, statementMs: 15_000, queryMs: 20_000, keepAliveMs: 10_000 } as const;

export function pgClientConfig(url: string): pg.ClientConfig {
  return {
    connectionString: url,
    connectionTimeoutMillis: DB_TIMEOUTS.connectMs,
    statement_timeout: DB_TIMEOUTS.statementMs,
    query_timeout: DB_TIMEOUTS.queryMs,
    idle_in_transaction_session_timeout: DB_TIMEOUTS.statementMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: DB_TIMEOUTS.keepAliveMs,
  };
}

const unheard = () => undefined;

export function createPool(url: string, logger: pino.Logger, max = 10): pg.Pool {
  const pool = new pg.Pool({ ...pgClientConfig(url), max });
  // An idle client losing its connection (a database restart) must not crash the process: the pool replaces it.
  // A restart loses every idle connection at once: one line says so, with how many since the last.
  let lastSaid = 0;
  let unsaid = 0;
  pool.on("error", (err) => {
    unsaid++;
    if (Date.now() - lastSaid < 30_000) return;
    logger.warn({ err: err.message, connections: unsaid }, "database connections lost; they are reopened on next use");
    lastSaid = Date.now();
    unsaid = 0;
  });
  // A checked-out client whose server goes away (a restart) emits "error" too, and unheard that ends the process.
  // It is heard from the moment the pool hands it over: a server shutting down may end a new connection in the very
  // packet that made it ready, before the caller's continuation runs. Its next query fails with it anyway, and the
  // pool then drops the client.
  pool.on("acquire", (client) => client.on("error", unheard));
  pool.on("release", (_err, client) => client.off("error", unheard));
  return pool;
}

/** The versions this build ships (`001_initial`...), in order. */
const shipped = () =>
  readdirSync(MIGRATIONS_DIR)
    .filter((f) => f.endsWith(".sql"))
    .sort()
    .map((f) => f.replace(/\.sql$/, ""));

/**
 * Checks that every migration this build ships is applied (MIGRATE=false: a migration job owns the schema);
 * throws naming what is missing.
 */
export async function checkMigrated(pool: pg.Pool): Promise<void> {
  const { rows } = await pool.query("SELECT version FROM schema_migrations").catch(() => ({ rows: [] as Array<{ version: string }> }));
  const done = new Set(rows.map((r) => r.version));
  const missing = shipped().filter((v) => !done.has(v));
  if (missing.length > 0)
    throw new Error(
      `the schema lacks migrations ${missing.join(", ")} and MIGRATE=false: run the migration job (node dist/app/main.js --migrate) first`,
    );
}

/** Runs `work` on one connection under the migration lock, so processes migrating at once take turns. */
async function underMigrationLock<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("SELECT pg_advisory_lock($1)", [LOCKS.migrate]);
    return await work(client);
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [LOCKS.migrate]).catch(() => undefined);
    client.release();
  }
}

/** One migration's file (up or down) and its record in schema_migrations, in one transaction. */
async function step(client: pg.PoolClient, file: string, record: [string, unknown[]], failure: string): Promise<void> {
  await client.query("BEGIN");
  try {
    await client.query(readFileSync(file, "utf8"));
    await client.query(...record);
    await client.query("COMMIT");
  } catch (err) {
    await client.query("ROLLBACK");
    throw new Error(`${failure}: ${(err as Error).message}`);
  }
}

export function migrate(pool: pg.Pool, logger: pino.Logger): Promise<string[]> {
  return underMigrationLock(pool, async (client) => {
    await client.query(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    const done = new Set((await client.query("SELECT version FROM schema_migrations")).rows.map((r) => r.version as string));
    const applied: string[] = [];
    for (const version of shipped()) {
      if (done.has(version)) continue;
      const file = path.join(MIGRATIONS_DIR, `${version}.sql`);
      await step(
        client,
        file,
        ["INSERT INTO schema_migrations (version) VALUES ($1)", [version]],
        `database migration ${version}.sql failed`,
      );
      applied.push(version);
    }
    if (applied.length > 0) logger.info({ applied }, "database schema migrated");
    return applied;
  });
}

/**
 * Reverts the applied migrations newer than `target` (a version such as `004_webhooks`, or `none` for all), newest
 * first, each with its `down/` file in a transaction of its own; for going back to an older release after an
 * upgrade's migration job. Returns the versions reverted. Under the same lock as migrating.
 */
export async function migrateDown(pool: pg.Pool, logger: pino.Logger, target: string): Promise<string[]> {
  const versions = shipped();
  if (target !== "none" && !versions.includes(target))
    throw new Error(`no migration '${target}': the versions are ${versions.join(", ")} (or none)`);
  return underMigrationLock(pool, async (client) => {
    const { rows } = await client.query("SELECT version FROM schema_migrations ORDER BY version DESC").catch(() => ({ rows: [] }));
    const reverted: string[] = [];
    for (const { version } of rows as Array<{ version: string }>) {
      if (target !== "none" && version <= target) break;
      const file = path.join(MIGRATIONS_DIR, "down", `${version}.sql`);
      await step(client, file, ["DELETE FROM schema_migrations WHERE version = $1", [version]], `reverting ${version} failed`);
      reverted.push(version);
    }
    if (reverted.length > 0) logger.warn({ reverted }, "database migrations reverted");
    return reverted;
  });
}

/**
 * What the ports query: a pool of createPool's (its clients heard while checked out), or that pool as the
 * maintenance's leader writes through it (leader-lease.ts).
 */
export interface Db {
  query(text: string, values?: unknown[]): Promise<pg.QueryResult>;
  connect(): Promise<pg.PoolClient>;
  /** Checked first in every transaction (a leader's lease); throws to refuse it. */
  fence?(client: pg.PoolClient): Promise<void>;
}

/** Runs `work` in one transaction. */
export async function inTransaction<T>(db: Db, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect();
  try {
    await client.query("BEGIN");
    await db.fence?.(client);
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw inDomain(err);
  } finally {
    client.release();
  }
}

const SOCKET_ERRORS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);
const UNREACHABLE_TEXT =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|connection error|Connection ended/i;

/**
 * Whether a failure means the database could not be reached or did not answer in time (as opposed to a statement
 * it refused): a socket error, SQLSTATE class 08, a server shutting down or starting, too many connections, a
 * statement cancelled by its timeout.
 */
export function unreachable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === "string" ? e.code : "";
  if (code.startsWith("08") || ["57P01", "57P02", "57P03", "53300", "57014"].includes(code) || SOCKET_ERRORS.has(code)) return true;
  return typeof e?.message === "string" && UNREACHABLE_TEXT.test(e.message);
}

/** A database that cannot be reached is the domain's database_unavailable; any other failure stays as it is. */
const inDomain = (err: unknown) => (unreachable(err) ? databaseUnavailable(err) : err);

/**
 * The pool as the ports use it: a database that cannot be reached is the domain's database_unavailable, and such an
 * outage is logged when it starts and when it ends (the requests refused meanwhile each log a warning, not this).
 */
export class PgDb implements Db {
  private readonly outage: OutageLog | undefined;

  constructor(
    readonly pool: pg.Pool,
    logger?: pino.Logger,
  ) {
    this.outage = logger && new OutageLog(logger, "the database", DATABASE_OUTAGE);
  }

  query(text: string, values?: unknown[]): Promise<pg.QueryResult> {
    const begun = performance.now();
    return this.pool.query(text, values).then(
      (r) => {
        this.outage?.ok(begun);
        return r;
      },
      (err) => {
        throw this.inDomain(err);
      },
    );
  }

  connect(): Promise<pg.PoolClient> {
    const begun = performance.now();
    return this.pool.connect().then(
      (c) => {
        this.outage?.ok(begun);
        return c;
      },
      (err) => {
        throw this.inDomain(err);
      },
    );
  }

  private inDomain(err: unknown): unknown {
    const mapped = inDomain(err);
    if (mapped !== err) this.outage?.failed(err);
    return mapped;
  }
}

const DATABASE_OUTAGE = {
  down: "the database cannot be reached: what needs it is answered 503 database_unavailable until it answers (said again when it does)",
  up: "the database answers again",
};
