// The distributed mode's ports on PostgreSQL: the pool, the schema migrated at start, LISTEN/NOTIFY, the maintenance's
// lease. A database that cannot be used is one error naming its host and database, never the
// password in DATABASE_URL.
import type pino from "pino";
import type { ClusterPorts } from "../state/ports.js";
import type { BlobStore } from "../stores/blob-store.js";
import { PgBatchRecords } from "./batches.js";
import { checkMigrated, createPool, migrate, PgDb } from "./db.js";
import { PgEventBus, subscribe } from "./events.js";
import { PgFileStore } from "./files.js";
import { LeaderDb, PgLeaderLease } from "./leader-lease.js";
import { PgWorkQueue } from "./shards.js";
import { PgWorkerRegistry } from "./workers.js";

export async function openPgPorts(deps: {
  url: string;
  blobs: BlobStore;
  expirySeconds: number;
  /** Unix seconds. */
  now: () => number;
  poolSize: number;
  logger: pino.Logger;
  /** False: the schema must already be current (a migration job applies it); default true. */
  migrate?: boolean;
}): Promise<ClusterPorts> {
  const { url, logger } = deps;
  const pool = createPool(url, logger, deps.poolSize);
  try {
    if (deps.migrate === false) await checkMigrated(pool);
    else await migrate(pool, logger);
  } catch (err) {
    await pool.end().catch(() => undefined);
    const u = new URL(url);
    throw new Error(`DATABASE_URL: cannot use the database ${u.host}${u.pathname}: ${(err as Error).message}`);
  }
  const db = new PgDb(pool, logger);
  return {
    batches: new PgBatchRecords(db),
    queue: new PgWorkQueue(db),
    files: new PgFileStore({ db, blobs: deps.blobs, expirySeconds: deps.expirySeconds, now: deps.now }),
    workers: new PgWorkerRegistry(db),
    events: new PgEventBus(db),
    subscribe: (onEvent) => subscribe(url, logger, onEvent),
    maintenance(holder, leaseSeconds) {
      const lock = new PgLeaderLease(db, "maintenance", holder, leaseSeconds);
      const fenced = new LeaderDb(db, lock);
      return {
        lock,
        batches: new PgBatchRecords(fenced),
        queue: new PgWorkQueue(fenced),
        files: new PgFileStore({ db: fenced, blobs: deps.blobs, expirySeconds: deps.expirySeconds, now: deps.now }),
      };
    },
    async ping() {
      await db.query("SELECT 1");
    },
    close: () => pool.end().catch(() => undefined),
  };
}
