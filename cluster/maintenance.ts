// Housekeeping that must run in exactly one process at a time and never stop: whichever process holds the
// PostgreSQL advisory lock (on a connection of its own) does it; when that process dies its connection closes, the
// lock is free, and another process takes over within a tick. Each tick: expire batches past their deadline,
// put lapsed leases back in the queue, write the error lines of stopped batches' waiting shards, finalize batches
// whose shards are all done, and (less often) remove expired files.
import pg from "pg";
import type { BlobStore } from "../api/contracts.js";
import { CANCELLED, EXPIRED } from "../api/control/job-runner.js";
import type { BatchRepo } from "./batches.js";
import { LOCKS } from "./db.js";
import { publish } from "./events.js";
import { finalizeBatch, type FinalizeDeps } from "./finalize.js";
import type { PgFileStore } from "./files.js";
import { ShardRun, type ShardRunDeps } from "./shard-run.js";
import type { ShardQueue } from "./shards.js";
import { FAILED } from "./worker.js";

const TICK_MS = 1_000;

export interface MaintenanceDeps extends FinalizeDeps {
  url: string;
  db: pg.Pool;
  batches: BatchRepo;
  queue: ShardQueue;
  files: PgFileStore;
  blobs: BlobStore;
  run: Omit<ShardRunDeps, "logger" | "scratchDir">;
  scratchDir: string;
  /** Its name in the shards it claims to close out. */
  id: string;
  collectIntervalSeconds: number;
  /** FILE_EXPIRY_SECONDS: how long an ended batch is kept. */
  expirySeconds: number;
}

export class Maintenance {
  private lockClient: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private again = false;
  private lastCollect = 0;
  private closed = false;

  constructor(private readonly deps: MaintenanceDeps) {}

  /** Whether this process runs the housekeeping now. */
  get leader(): boolean {
    return this.lockClient !== undefined;
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), TICK_MS);
    this.timer.unref();
    void this.tick();
  }

  /** One round of housekeeping; one asked for while a round runs follows it (an event is never dropped). */
  async tick(): Promise<void> {
    if (this.closed) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.ticking = true;
    try {
      do {
        this.again = false;
        if (!(await this.holdLock())) return;
        await this.housekeep();
      } while (this.again && !this.closed);
    } catch (err) {
      this.deps.logger.warn({ err: (err as Error).message }, "maintenance tick failed; trying again");
    } finally {
      this.ticking = false;
    }
  }

  private async housekeep(): Promise<void> {
    const { batches, queue, db, logger, now } = this.deps;
    for (const id of await batches.expireDue(now())) {
      logger.warn({ batch_id: id }, "batch reached its deadline unfinished: expiring");
      await publish(db, { type: "stop", batch_id: id, reason: "expired" });
    }
    const reaped = await queue.reap();
    if (reaped > 0) logger.warn({ shards: reaped }, "leases lapsed (a worker died or lost the database): shards back in the queue");
    await this.closeOutStopped();
    for (const id of await batches.readyToFinish()) {
      await finalizeBatch(this.deps, id).catch((err) => logger.warn({ err: (err as Error).message, batch_id: id }, "cannot finalize yet"));
    }
    if (Date.now() - this.lastCollect >= this.deps.collectIntervalSeconds * 1000) {
      this.lastCollect = Date.now();
      await this.collect();
    }
  }

  /**
   * Expired files go with their contents (a batch's output included, by its own retention); a batch goes
   * FILE_EXPIRY_SECONDS after it ended, as in the embedded mode, with whatever objects of its are left.
   */
  private async collect(): Promise<void> {
    const { files, batches, blobs, logger, now } = this.deps;
    const expired = await files.expired(now());
    for (const f of expired) await files.remove(f.id);
    const ended = await batches.endedBefore(now() - this.deps.expirySeconds);
    for (const id of ended) {
      await blobs.deletePrefix(`batches/${id}/shards/`);
      const { orphanInput } = await batches.remove(id);
      if (orphanInput) await blobs.delete(orphanInput);
    }
    if (expired.length + ended.length > 0)
      logger.info({ files: expired.length, batches: ended.length }, "housekeeping: deleted expired files and batches");
  }

  /** A stopped batch's shards that no worker runs get their error lines here (every request accounted for). */
  private async closeOutStopped(): Promise<void> {
    const { queue, logger } = this.deps;
    for (const shard of await queue.claimStopped(this.deps.id, this.deps.run.leaseSeconds, 20)) {
      const reason =
        shard.stopReason === "cancelled"
          ? CANCELLED
          : shard.stopReason === "expired"
            ? EXPIRED
            : FAILED("another shard of it could not run");
      const stop = new AbortController();
      stop.abort(reason);
      const run = new ShardRun({ ...this.deps.run, logger, scratchDir: this.deps.scratchDir }, shard);
      await run.run(undefined, stop.signal);
    }
  }

  /** Takes the lock if free; keeps it while its connection lives. */
  private async holdLock(): Promise<boolean> {
    if (this.lockClient) return true;
    const c = new pg.Client({ connectionString: this.deps.url });
    c.on("error", () => undefined);
    try {
      await c.connect();
      const { rows } = await c.query("SELECT pg_try_advisory_lock($1) AS ok", [LOCKS.maintenance]);
      if (!rows[0].ok) {
        await c.end();
        return false;
      }
    } catch {
      await c.end().catch(() => undefined);
      return false;
    }
    c.on("end", () => {
      if (this.lockClient === c) this.lockClient = undefined;
    });
    c.on("error", () => {
      if (this.lockClient === c) this.lockClient = undefined;
      c.end().catch(() => undefined);
    });
    this.lockClient = c;
    this.deps.logger.info("this process now runs the maintenance (finalizing, expiry, lease reaping)");
    return true;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    while (this.ticking) await new Promise((r) => setTimeout(r, 20));
    await this.lockClient?.end().catch(() => undefined);
    this.lockClient = undefined;
  }
}
