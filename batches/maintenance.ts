// Housekeeping that must run in exactly one process at a time and never stop: whichever process holds the leader
// lease does it. The holder renews it every tick on a timer of its own (a long finalize does not starve it); one
// that dies, freezes or is cut off loses it within LEASE_SECONDS and another process takes over at its next tick,
// so leadership moves within LEASE_SECONDS + 1 s. What the old holder still writes is refused (the lease's term is
// checked in each write's transaction). Each tick, every step bounded in time: expire batches past their deadline,
// put lapsed leases back in the queue, write the error lines of stopped batches' waiting shards (and of shards whose
// model no live worker serves any more, close-out.ts), finalize batches
// whose shards are all done, and (less often) remove expired files.

import { OutageLog } from "../state/outage-log.js";
import { type EventBus, type LeaderLock, LeaderLost, type WorkerRegistry, type WorkQueue } from "../state/ports.js";
import { chooseYields, projectedFinish, type SlaBatch } from "../state/sla.js";
import { closeOutShard, UnservedShards } from "./close-out.js";
import { type FinalizeDeps, finalizeBatch } from "./finalize.js";
import { CANCELLED, EXPIRED, FAILED, STOPPED_WHY } from "./reasons.js";
import { removeBatch } from "./remove-batch.js";
import type { StartShardRun } from "./shard-run.js";
import { WebhookSender } from "./webhooks.js";

const TICK_MS = 1_000;
/** Bounds on one step: a database step's statements are bounded too (postgres/db.ts); finalizing streams a whole batch. */
const STEP_MS = { short: 30_000, finalize: 600_000, collect: 300_000 } as const;

/** A step that did not end in time: the tick goes on (a late write of the abandoned step is fenced by the lease). */
function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`maintenance step '${what}' took over ${ms / 1000} s`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

export interface MaintenanceDeps extends FinalizeDeps {
  lock: LeaderLock;
  events: EventBus;
  newRun: StartShardRun;
  leaseSeconds: number;
  /** Its name in the shards it claims to close out. */
  id: string;
  collectIntervalSeconds: number;
  /** FILE_EXPIRY_SECONDS: how long an ended batch is kept. */
  expirySeconds: number;
  /** Uploads an hour old go in the retention pass. */
  uploads?: { collect(now: number): Promise<number> };
  /** WEBHOOK_RETRY_SECONDS: how long a failing webhook delivery is retried. */
  webhookRetrySeconds?: number;
  /** Workers' rows: forgotten WORKER_RETENTION_SECONDS after their last heartbeat (a killed worker's); the live ones the SLA weighs. */
  workers?: Pick<WorkerRegistry, "forget" | "live">;
  workerRetentionSeconds?: number;
  /**
   * Shards of a model no worker serves (close-out.ts): how long they wait before their lines fail, and what is served
   * where this process's workers are the only ones (else the live workers' models).
   */
  unserved?: { graceSeconds: number; served?: readonly string[] };
  /** SLA enforcement (state/sla.ts): urgent batches make less urgent shards yield; at-risk deadlines are told. */
  sla?: { urgentSeconds: number; yieldGraceMs: number };
  /**
   * The queue as every process reads it, not through the leader's fence: a process that does not lead reads the
   * batches at risk there (through the fence each read was refused, and every such process warned at start).
   */
  reads?: Pick<WorkQueue, "slaSnapshot">;
}

/** How long a shard asked to yield is left to do so before it may be asked again (its requests' grace and a checkpoint). */
const YIELD_PATIENCE_MS = 30_000;

export class Maintenance {
  private timer: NodeJS.Timeout | undefined;
  private renewing: Promise<boolean> | undefined;
  private ticking = false;
  private again = false;
  private lastCollect = 0;
  private closed = false;
  private wasLeader = false;
  /** When the state last answered this process, and before when no lease is reaped (a grace after an outage). */
  private reachedAt = Date.now();
  private reapAfter = 0;
  /** Whether the last renewal of the lease reached the state. */
  private reached = false;
  private readonly outage: OutageLog;

  private readonly sender: WebhookSender | undefined;
  private readonly unserved: UnservedShards | undefined;
  /** Shards asked to yield (`batch/idx`), with when (ms) and the urgent shard they yield to: each is asked once. */
  private readonly yielding = new Map<string, { at: number; for: string }>();
  /** Batches already told to be at risk (once each, while this process leads). */
  private readonly atRisk = new Set<string>();
  /** The models of the open batches whose projection passes their deadline, as of the last SLA tick. */
  private risky = new Set<string>();
  private riskSeenAt = 0;

  constructor(private readonly deps: MaintenanceDeps) {
    this.outage = new OutageLog(deps.logger, "maintenance tick");
    const { workers, unserved } = deps;
    if (workers)
      this.unserved = new UnservedShards({ ...deps, workers, graceSeconds: unserved?.graceSeconds ?? 300, served: unserved?.served });
    const { webhooks: targets, batches, logger, now, metrics } = deps;
    if (targets)
      this.sender = new WebhookSender({ batches, targets, retrySeconds: deps.webhookRetrySeconds ?? 72 * 3600, logger, now, metrics });
  }

  /** Whether this process runs the housekeeping now. */
  get leader(): boolean {
    return this.deps.lock.held;
  }

  /** Resolves after the first round (what the last process left due is handled before anything is served). */
  start(): Promise<void> {
    this.timer = setInterval(() => {
      void this.holdLock();
      void this.tick();
    }, TICK_MS);
    this.timer.unref();
    return this.tick();
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
        if (!(await this.holdLock())) {
          // Not the leader: it only follows the batches at risk, and an outage is the database's own line to say.
          await this.followRisk().catch((err) => this.deps.logger.debug({ err }, "the batches at risk could not be read"));
          if (this.reached) this.outage.ok();
          return;
        }
        await this.housekeep();
        this.outage.ok();
      } while (this.again && !this.closed);
    } catch (err) {
      // Another process took the lease over between this one's renewal and its write: it does the housekeeping now.
      if (err instanceof LeaderLost) this.deps.logger.info("another process took the maintenance lease over: it does the housekeeping");
      else this.outage.failed(err);
    } finally {
      this.ticking = false;
    }
  }

  private async housekeep(): Promise<void> {
    const { batches, queue, events, logger, now } = this.deps;
    for (const id of await within(STEP_MS.short, "expire", batches.expireDue(now()))) {
      logger.warn({ batch_id: id }, "batch reached its deadline unfinished: expiring");
      await events.publish({ type: "stop", batch_id: id, reason: "expired" });
    }
    const reaped = Date.now() < this.reapAfter ? 0 : await within(STEP_MS.short, "reap", queue.reap(this.deps.leaseSeconds));
    if (reaped > 0) logger.warn({ shards: reaped }, "leases lapsed (a worker died or lost the database): shards back in the queue");
    await within(STEP_MS.short, "close out", this.closeOutStopped());
    if (this.unserved) await within(STEP_MS.short, "unserved", this.unserved.closeOut());
    for (const id of await within(STEP_MS.short, "ready", batches.readyToFinish())) {
      if (!this.deps.lock.held) return;
      await within(STEP_MS.finalize, "finalize", finalizeBatch(this.deps, id)).catch((err) =>
        logger.warn({ err: (err as Error).message, batch_id: id }, "cannot finalize yet"),
      );
    }
    if (this.sender && this.deps.lock.held) await within(STEP_MS.short, "webhooks", this.sender.startDue());
    if (this.deps.sla && this.deps.lock.held) await within(STEP_MS.short, "sla", this.enforceSla(this.deps.sla));
    if (Date.now() - this.lastCollect >= this.deps.collectIntervalSeconds * 1000) {
      this.lastCollect = Date.now();
      await within(STEP_MS.collect, "collect", this.collect());
    }
  }

  /**
   * One retention pass (it runs on its own every COLLECT_INTERVAL_SECONDS; `now` lets a caller look ahead).
   * Expired files go with their contents (a batch's output included, by its own retention); a batch goes
   * FILE_EXPIRY_SECONDS after it ended, with whatever objects of its no file still holds.
   */
  async collect(now = this.deps.now()): Promise<{ files: number; batches: number }> {
    const { files, batches, blobs, logger } = this.deps;
    const expired = await files.expired(now);
    for (const f of expired) await files.remove(f.id);
    const ended = await batches.endedBefore(now - this.deps.expirySeconds);
    for (const id of ended) await removeBatch({ files, batches, blobs }, id, { withResults: false });
    const uploads = (await this.deps.uploads?.collect(now)) ?? 0;
    if (uploads > 0) logger.info({ uploads }, "housekeeping: removed uploads past their hour");
    const workers = (await this.deps.workers?.forget(this.deps.workerRetentionSeconds ?? 86_400)) ?? 0;
    if (workers > 0) logger.info({ workers }, "housekeeping: forgot workers not heard from within WORKER_RETENTION_SECONDS");
    if (expired.length + ended.length > 0)
      logger.info({ files: expired.length, batches: ended.length }, "housekeeping: deleted expired files and batches");
    return { files: expired.length, batches: ended.length };
  }

  /**
   * Urgent batches waiting with no free slot make less urgent running shards yield (spot first); running batches
   * whose projected finish passes their deadline are logged and counted, once each.
   */
  private async enforceSla(sla: NonNullable<MaintenanceDeps["sla"]>): Promise<void> {
    const { queue, events, logger, now, metrics, leaseSeconds } = this.deps;
    const at = now();
    const [progress, workers] = await Promise.all([queue.slaSnapshot(), this.deps.workers?.live(leaseSeconds) ?? []]);
    const snapshot = { ...progress, workers };
    const since = Date.now() - Math.max(YIELD_PATIENCE_MS, 2 * sla.yieldGraceMs);
    for (const [k, y] of this.yielding) if (y.at < since) this.yielding.delete(k);
    const pending = new Map([...this.yielding].map(([k, y]) => [k, y.for]));
    for (const y of chooseYields(snapshot, at, sla.urgentSeconds, pending)) {
      this.yielding.set(`${y.victim.batchId}/${y.victim.idx}`, { at: Date.now(), for: `${y.for.batchId}/${y.for.idx}` });
      logger.warn(
        { batch_id: y.for.batchId, deadline_at: y.for.deadlineAt, yielding: y.victim },
        "an urgent batch waits with every slot taken: a less urgent shard yields to it at its next checkpoint",
      );
      await events.publish({ type: "yield", batch_id: y.victim.batchId, idx: y.victim.idx, for_batch: y.for.batchId });
    }
    const open = new Set(snapshot.batches.map((b) => b.id));
    for (const id of this.atRisk) if (!open.has(id)) this.atRisk.delete(id);
    const late = lateBatches(snapshot.batches, at);
    for (const [b, finish] of late) {
      if (this.atRisk.has(b.id)) continue;
      this.atRisk.add(b.id);
      metrics?.slaEvent("at_risk");
      logger.warn(
        { batch_id: b.id, projected_finish_at: finish, deadline_at: b.deadlineAt, done: b.done, total: b.total },
        "deadline at risk: at its rate so far the batch ends after its deadline",
      );
    }
    this.risky = modelsOf(snapshot, late);
    this.riskSeenAt = Date.now();
  }

  /**
   * A process that does not lead still knows which models have a batch at risk (its synchronous lanes give their
   * share back for them): from the same projection, looked at every RISK_LOOK_MS.
   */
  private async followRisk(): Promise<void> {
    if (!this.deps.sla || Date.now() - this.riskSeenAt < RISK_LOOK_MS) return;
    this.riskSeenAt = Date.now();
    const snapshot = await within(STEP_MS.short, "sla", (this.deps.reads ?? this.deps.queue).slaSnapshot());
    this.risky = modelsOf(snapshot, lateBatches(snapshot.batches, this.deps.now()));
  }

  /** Whether an open batch of `model` is projected to end after its deadline (as of the last SLA tick). */
  modelAtRisk(model: string): boolean {
    return this.risky.has(model);
  }

  /** A stopped batch's shards that no worker runs get their error lines here (every request accounted for). */
  private async closeOutStopped(): Promise<void> {
    for (const shard of await this.deps.queue.claimStopped(this.deps.id, this.deps.leaseSeconds, 20)) {
      const reason = shard.stopReason === "cancelled" ? CANCELLED : shard.stopReason === "expired" ? EXPIRED : FAILED(STOPPED_WHY);
      await closeOutShard(this.deps, shard, reason);
    }
  }

  /** Takes or renews the lease (one attempt at a time); says when this process gains or loses it. */
  private holdLock(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    this.renewing ??= (async () => {
      const { lock, logger } = this.deps;
      const before = this.wasLeader;
      const held = await within(STEP_MS.short, "lease", lock.hold()).then(
        (h) => {
          // Cut off from the state for over a lease: so, likely, were the workers. They get a lease to renew
          // theirs before any is judged lapsed (the database's own restart is judged by the queue itself).
          if (Date.now() - this.reachedAt > this.deps.leaseSeconds * 1000) this.reapAfter = Date.now() + this.deps.leaseSeconds * 1000;
          this.reachedAt = Date.now();
          this.reached = true;
          return h;
        },
        () => {
          this.reached = false;
          return lock.held;
        },
      );
      this.wasLeader = held;
      if (held && !before) logger.info("this process now runs the maintenance (finalizing, expiry, lease reaping)");
      if (!held && before) logger.warn("this process lost the maintenance lease (frozen, cut off, or taken over): it stops housekeeping");
      return held;
    })().finally(() => (this.renewing = undefined));
    return this.renewing;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    while (this.ticking) await new Promise((r) => setTimeout(r, 20));
    await this.sender?.close();
    await this.renewing?.catch(() => undefined);
    await this.deps.lock.release();
  }
}

/** How often a process that does not lead looks at which models have a batch at risk. */
const RISK_LOOK_MS = 5_000;

/** The open batches projected to end after their deadline, each with its projected finish (unix seconds). */
function lateBatches(batches: readonly SlaBatch[], at: number): Map<SlaBatch, number> {
  const late = new Map<SlaBatch, number>();
  for (const b of batches) {
    const finish = projectedFinish(b, at);
    if (finish !== null && finish > b.deadlineAt) late.set(b, finish);
  }
  return late;
}

/** The models whose open shards belong to the `late` batches. */
function modelsOf(snapshot: { shards: Array<{ batchId: string; model: string }> }, late: ReadonlyMap<SlaBatch, number>): Set<string> {
  const ids = new Set([...late.keys()].map((b) => b.id));
  return new Set(snapshot.shards.filter((s) => ids.has(s.batchId)).map((s) => s.model));
}
