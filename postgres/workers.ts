// The live workers in PostgreSQL: each worker's row (pool, capacity, models, what it runs) is upserted with its
// heartbeat; a worker not heard from within a lease is not counted.
import type { WorkerInfo, WorkerRegistry } from "../state/ports.js";
import type { Db } from "./db.js";

export class PgWorkerRegistry implements WorkerRegistry {
  constructor(private readonly db: Db) {}

  async register(w: Parameters<WorkerRegistry["register"]>[0]): Promise<void> {
    await this.db.query(
      `INSERT INTO workers (id, pool, capacity, models, running, url, catalogue, last_seen) VALUES ($1, $2, $3, $4, $5, $6, $7, now())
       ON CONFLICT (id) DO UPDATE SET pool = $2, capacity = $3, models = $4, running = $5, url = $6, catalogue = $7, last_seen = now()`,
      [w.id, w.pool, w.capacity, w.models, JSON.stringify(w.running), w.url ?? null, w.catalogue ? JSON.stringify(w.catalogue) : null],
    );
  }

  async preempted(id: string, cooldownSeconds: number): Promise<void> {
    await this.db.query(
      "UPDATE workers SET preempted_until = now() + make_interval(secs => $2), preemptions = preemptions + 1 WHERE id = $1",
      [id, cooldownSeconds],
    );
  }

  async unregister(id: string): Promise<void> {
    await this.db.query("DELETE FROM workers WHERE id = $1", [id]);
  }

  async forget(olderThanSeconds: number): Promise<number> {
    const { rowCount } = await this.db.query("DELETE FROM workers WHERE last_seen < now() - make_interval(secs => $1)", [olderThanSeconds]);
    return rowCount ?? 0;
  }

  async live(withinSeconds: number): Promise<WorkerInfo[]> {
    const { rows } = await this.db.query(
      `SELECT id, pool, capacity, running, models, url, catalogue, extract(epoch FROM last_seen)::bigint AS last_seen, preemptions,
              coalesce(preempted_until > now(), false) AS preempted,
              CASE WHEN preempted_until > now() THEN ceil(extract(epoch FROM preempted_until))::bigint END AS preempted_until,
              (SELECT count(*) FROM shards s WHERE s.worker_id = w.id AND s.state = 'running')::int AS in_use
       FROM workers w WHERE last_seen > now() - make_interval(secs => $1) ORDER BY id`,
      [withinSeconds],
    );
    return rows.map((w) => ({
      id: w.id,
      pool: w.pool,
      capacity: w.capacity,
      inUse: w.in_use,
      running: w.running,
      models: w.models,
      lastSeen: Number(w.last_seen),
      preempted: w.preempted,
      preemptedUntil: w.preempted_until === null ? null : Number(w.preempted_until),
      preemptions: w.preemptions,
      url: w.url ?? null,
      catalogue: w.catalogue ?? null,
    }));
  }

  async queueCounts(): Promise<{ depth: number; running: number }> {
    const { rows } = await this.db.query(
      `SELECT (SELECT count(*) FROM batches WHERE status = 'validating' AND stop_reason IS NULL)::int AS depth,
              (SELECT count(*) FROM shards WHERE state = 'running')::int AS running`,
    );
    return rows[0];
  }
}
