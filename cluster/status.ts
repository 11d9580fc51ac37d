// /queue/stats and /pools of the distributed mode, read from the shared tables: the pools are the live workers
// registered in each (their capacities summed), the queue the batches with shards waiting.
import type pg from "pg";
import type { ControlPlaneStatus, PoolStatus, QueueStats } from "../api/contracts.js";
import { publish } from "./events.js";

export class ClusterStatus implements ControlPlaneStatus {
  constructor(private readonly deps: { db: pg.Pool; maxQueueDepth: number; leaseSeconds: number; preemptCooldownSeconds: number }) {}

  async queueStats(): Promise<QueueStats> {
    const { rows } = await this.deps.db.query(
      `SELECT (SELECT count(DISTINCT batch_id) FROM shards WHERE state = 'queued')::int AS depth,
              (SELECT count(*) FROM shards WHERE state = 'running')::int AS running`,
    );
    return { depth: rows[0].depth, max_depth: this.deps.maxQueueDepth, running: rows[0].running };
  }

  async poolStatus(): Promise<PoolStatus[]> {
    const { rows } = await this.deps.db.query(
      `SELECT id, pool, capacity, running, extract(epoch FROM last_seen)::bigint AS last_seen, preemptions,
              coalesce(preempted_until > now(), false) AS preempted,
              (SELECT count(*) FROM shards s WHERE s.worker_id = w.id AND s.state = 'running')::int AS in_use
       FROM workers w WHERE last_seen > now() - make_interval(secs => $1) ORDER BY id`,
      [this.deps.leaseSeconds],
    );
    return (["spot", "dedicated"] as const).map((name) => {
      const ws = rows.filter((w) => w.pool === name);
      const live = ws.filter((w) => !w.preempted);
      const capacity = live.reduce((n, w) => n + w.capacity, 0);
      const inUse = live.reduce((n, w) => n + w.in_use, 0);
      return {
        name,
        capacity,
        in_use: inUse,
        available: Math.max(0, capacity - inUse),
        preempted: ws.filter((w) => w.preempted).reduce((n, w) => n + w.capacity, 0),
        preemptions: ws.reduce((n, w) => n + w.preemptions, 0),
        jobs: [...new Set(ws.flatMap((w) => w.running as string[]))],
        workers: ws.map((w) => ({
          id: w.id,
          capacity: w.capacity,
          in_use: w.in_use,
          last_seen: Number(w.last_seen),
          preempted: w.preempted,
        })),
      };
    });
  }

  /** Announces the reclaim to the spot workers: each checkpoints its shards and hands them back. */
  async preemptSpot(): Promise<{ preempted: string[]; cooldown_seconds: number }> {
    const spot = (await this.poolStatus()).find((p) => p.name === "spot");
    await publish(this.deps.db, { type: "preempt", pool: "spot", cooldown_seconds: this.deps.preemptCooldownSeconds });
    return { preempted: spot?.jobs ?? [], cooldown_seconds: this.deps.preemptCooldownSeconds };
  }
}
