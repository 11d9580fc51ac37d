// The work queue of the distributed mode: shards claimed with FOR UPDATE SKIP LOCKED under a lease that the
// worker renews; every claim raises the shard's epoch, and a worker's checkpoints and its end count only under
// the epoch it claimed, so a worker whose lease lapsed and was taken over can write nothing that counts.

import { extendOrder, type OrderEntry, type OutputOrder, orderedTotal, outputKeys } from "../state/output-order.js";
import {
  type ClaimedShard,
  type ClaimOptions,
  type CommitResult,
  type Heartbeat,
  shardKey as key,
  type ShardCommit,
  type ShardPart,
  type ShardView,
  type StopReason,
  type WorkQueue,
} from "../state/ports.js";
import type { SlaSnapshot } from "../state/sla.js";
import { type Db, inTransaction } from "./db.js";

/** Each shard's committed output objects, by shard. */
const keysOf = (rows: Array<{ idx: number; parts: ShardPart[] }>) => new Map(rows.map((r) => [r.idx, outputKeys(r.parts)]));

const claimed =
  (pool: ClaimedShard["pool"]) =>
  (r: any): ClaimedShard => ({
    batchId: r.batch_id,
    idx: r.idx,
    model: r.model,
    endpoint: r.endpoint,
    inputKey: r.input_key,
    byteStart: Number(r.byte_start),
    byteEnd: Number(r.byte_end),
    total: r.total,
    epoch: r.epoch,
    checkpoints: r.checkpoints,
    parts: r.parts,
    counted: {
      completed: r.completed,
      failed: r.failed,
      usage: { promptTokens: Number(r.input_tokens), cachedTokens: Number(r.cached_tokens), completionTokens: Number(r.output_tokens) },
      // Absent when none, as the embedded state has it.
      ...(Number(r.cached_lines) > 0 ? { cached: { lines: Number(r.cached_lines), outputTokens: Number(r.cached_output_tokens) } } : {}),
    },
    stopReason: r.stop_reason,
    deadlineAt: Number(r.deadline_at),
    urgent: r.urgent === true,
    pool,
  });

// A lease lapsed on the database's clock, unless the server itself came back less than a lease ago (secs: the
// lease): its outage kept every worker from renewing, and they get that long to do so before anyone takes over.
const LAPSED = (secs: string) => `(s.lease_until < now() AND pg_postmaster_start_time() < now() - make_interval(secs => ${secs}))`;

// Near its deadline: under urgentSeconds left, or under a tenth of its window (as the embedded queue decides).
const URGENT = "(b.deadline_at - $5 < $6 OR (b.deadline_at - $5) * 10 < (b.deadline_at - b.submitted_at))";
// Spreads a batch's shards over idle workers: the batches this worker runs more shards of than another live worker
// of its pool that serves the model and has a free slot (that one takes their next shard). Computed once per claim
// (it does not depend on the shard considered): a claim over thousands of queued shards stays as cheap as before.
const HELD_BACK = `(SELECT m.batch_id
  FROM (SELECT batch_id, count(*) AS n FROM shards WHERE worker_id = $1 AND state = 'running' GROUP BY batch_id) m
  JOIN batches hb ON hb.id = m.batch_id
  WHERE EXISTS (SELECT 1 FROM workers w
    WHERE w.id <> $1 AND w.pool = $2 AND hb.model = ANY(w.models) AND w.last_seen > now() - make_interval(secs => $4)
      AND (w.preempted_until IS NULL OR w.preempted_until < now())
      AND w.capacity > (SELECT count(*) FROM shards r WHERE r.worker_id = w.id AND r.state = 'running')
      AND (SELECT count(*) FROM shards r WHERE r.worker_id = w.id AND r.batch_id = m.batch_id AND r.state = 'running') < m.n))`;
// Free slots of the other pool's live workers: spot first for ordinary batches, dedicated first for urgent ones,
// each falling back to the other only when it has no room.
const OTHER_FREE = `(SELECT coalesce(sum(w.capacity - (SELECT count(*) FROM shards r WHERE r.worker_id = w.id AND r.state = 'running')), 0)
  FROM workers w
  WHERE w.pool <> $2 AND w.last_seen > now() - make_interval(secs => $4) AND (w.preempted_until IS NULL OR w.preempted_until < now()))`;

export class PgWorkQueue implements WorkQueue {
  constructor(private readonly db: Db) {}

  /**
   * Up to `limit` shards for this worker: urgent ones first (a slot a shard yielded goes to the batch it yielded
   * to), then checkpointed ones (they resume), then by the keys' fair shares (tenancy/fair-share.ts: the key whose
   * turn starts earliest), then in submission order. The claim and the shares it advances are one transaction.
   */
  async claim(o: ClaimOptions): Promise<ClaimedShard[]> {
    const weights = Object.entries(o.weights ?? {});
    return inTransaction(this.db, async (c) => {
      const { rows } = await c.query(
        `WITH held AS MATERIALIZED ${HELD_BACK},
         clock AS MATERIALIZED (SELECT v FROM share_clock),
         pick AS (
           SELECT s.batch_id, s.idx, coalesce(w.weight, 1) AS weight,
             greatest(coalesce(ks.vtime, 0), (SELECT v FROM clock)) AS tag
           FROM shards s JOIN batches b ON b.id = s.batch_id
             LEFT JOIN key_shares ks ON ks.owner = coalesce(b.owner, '')
             LEFT JOIN unnest($9::text[], $10::float8[]) AS w(owner, weight) ON w.owner = coalesce(b.owner, '')
           WHERE b.stop_reason IS NULL AND b.status IN ('validating', 'in_progress') AND s.model = ANY($3)
             AND (b.doc->>'paused_at') IS NULL
             AND (s.state = 'queued' OR (s.state = 'running' AND $8::boolean AND ${LAPSED("$4")}))
             AND ($2::text IS NULL OR CASE WHEN ${URGENT} THEN $2 = 'dedicated' OR ${OTHER_FREE} <= 0 ELSE $2 = 'spot' OR ${OTHER_FREE} <= 0 END)
             AND NOT EXISTS (SELECT 1 FROM held WHERE held.batch_id = s.batch_id)
             AND NOT EXISTS (SELECT 1 FROM unnest($11::text[], $12::int[]) AS mine(batch_id, idx)
               WHERE mine.batch_id = s.batch_id AND mine.idx = s.idx)
           ORDER BY ${URGENT} DESC, jsonb_array_length(s.parts) > 0 DESC, CASE WHEN ${URGENT} THEN b.deadline_at END,
             greatest(coalesce(ks.vtime, 0), (SELECT v FROM clock)), b.seq, s.idx
           LIMIT $7 FOR UPDATE OF s SKIP LOCKED)
         UPDATE shards s SET state = 'running', epoch = s.epoch + 1, worker_id = $1, lease_until = now() + make_interval(secs => $4)
         FROM pick, batches b WHERE s.batch_id = pick.batch_id AND s.idx = pick.idx AND b.id = s.batch_id
         RETURNING s.*, b.input_key, b.stop_reason, b.deadline_at, b.doc->>'endpoint' AS endpoint, ${URGENT} AS urgent,
           coalesce(b.owner, '') AS share_owner, pick.tag, pick.weight`,
        [
          o.workerId,
          o.pool,
          o.models,
          o.leaseSeconds,
          o.now,
          o.urgentSeconds,
          o.limit,
          o.takeLapsed ?? true,
          weights.map(([k]) => k),
          weights.map(([, w]) => w),
          (o.holding ?? []).map((h) => h.batchId),
          (o.holding ?? []).map((h) => h.idx),
        ],
      );
      if (rows.length > 0) {
        // Each shard claimed moves its key's virtual time on by 1/weight from where its turn started.
        const vtime = new Map<string, number>();
        for (const r of rows) vtime.set(r.share_owner, (vtime.get(r.share_owner) ?? r.tag) + 1 / r.weight);
        await c.query(
          `INSERT INTO key_shares (owner, vtime) SELECT * FROM unnest($1::text[], $2::float8[])
           ON CONFLICT (owner) DO UPDATE SET vtime = greatest(key_shares.vtime, EXCLUDED.vtime)`,
          [[...vtime.keys()], [...vtime.values()]],
        );
        await c.query("UPDATE share_clock SET v = greatest(v, $1)", [Math.max(...rows.map((r) => r.tag))]);
      }
      return rows.map(claimed(o.pool));
    });
  }

  /**
   * Claims the unfinished shards of stopped batches that no worker holds, to write their error lines (maintenance
   * does this for a cancelled or expired batch whose shards were waiting).
   */
  claimStopped(workerId: string, leaseSeconds: number, limit: number): Promise<ClaimedShard[]> {
    return this.claimOutside("b.stop_reason IS NOT NULL", [workerId, leaseSeconds, limit]);
  }

  claimUnserved(workerId: string, models: readonly string[], leaseSeconds: number, limit: number): Promise<ClaimedShard[]> {
    return this.claimOutside(
      "b.stop_reason IS NULL AND b.status IN ('validating', 'in_progress') AND (b.doc->>'paused_at') IS NULL AND s.model = ANY($4)",
      [workerId, leaseSeconds, limit, models],
    );
  }

  /** Unfinished shards no worker holds that `where` picks ($1 the worker, $2 its lease, $3 how many), claimed outside the pools. */
  private async claimOutside(where: string, params: unknown[]): Promise<ClaimedShard[]> {
    const { rows } = await this.db.query(
      `WITH pick AS (
         SELECT s.batch_id, s.idx FROM shards s JOIN batches b ON b.id = s.batch_id
         WHERE ${where} AND s.state <> 'done' AND (s.state = 'queued' OR ${LAPSED("$2")})
         ORDER BY b.seq, s.idx LIMIT $3 FOR UPDATE OF s SKIP LOCKED)
       UPDATE shards s SET state = 'running', epoch = s.epoch + 1, worker_id = $1, lease_until = now() + make_interval(secs => $2)
       FROM pick, batches b WHERE s.batch_id = pick.batch_id AND s.idx = pick.idx AND b.id = s.batch_id
       RETURNING s.*, b.input_key, b.stop_reason, b.deadline_at, b.doc->>'endpoint' AS endpoint`,
      params,
    );
    return rows.map(claimed(null));
  }

  /**
   * Renews the leases of the shards a worker runs. Returns those it no longer holds (taken over: stop them at
   * once, write nothing) and the stop reasons of their batches (a cancel or expiry this worker may have missed).
   */
  async heartbeat(
    workerId: string,
    shards: Array<Pick<ClaimedShard, "batchId" | "idx" | "epoch">>,
    leaseSeconds: number,
  ): Promise<Heartbeat> {
    if (shards.length === 0) return { lost: new Set(), stops: new Map(), paused: new Set() };
    const { rows } = await this.db.query(
      `UPDATE shards s SET lease_until = now() + make_interval(secs => $5)
       FROM unnest($2::text[], $3::int[], $4::int[]) AS x(batch_id, idx, epoch), batches b
       WHERE s.batch_id = x.batch_id AND s.idx = x.idx AND s.epoch = x.epoch AND s.worker_id = $1 AND s.state = 'running'
         AND b.id = s.batch_id
       RETURNING s.batch_id, s.idx, b.stop_reason, b.doc->>'paused_at' AS paused_at`,
      [workerId, shards.map((s) => s.batchId), shards.map((s) => s.idx), shards.map((s) => s.epoch), leaseSeconds],
    );
    const held = new Set(rows.map((r) => key({ batchId: r.batch_id, idx: r.idx })));
    const stops = new Map<string, StopReason>();
    for (const r of rows) if (r.stop_reason) stops.set(r.batch_id, r.stop_reason);
    const paused = new Set<string>(rows.filter((r) => r.paused_at).map((r) => r.batch_id));
    return { lost: new Set(shards.map(key).filter((k) => !held.has(k))), stops, paused };
  }

  /**
   * Records a checkpoint's parts and adds its counts to the batch, in one transaction, under the claimed epoch
   * and the checkpoint number read. A commit retried after its reply was lost finds its own part (every upload
   * has keys of its own) and counts as committed, not twice; any other commit under a stale number is refused.
   */
  async commit(s: ClaimedShard, c: ShardCommit, leaseSeconds: number): Promise<CommitResult> {
    const { rows } = await this.db.query(
      `WITH s AS (
         UPDATE shards SET parts = parts || $5::jsonb, checkpoints = checkpoints + 1, completed = completed + $6,
           failed = failed + $7, input_tokens = input_tokens + $8, cached_tokens = cached_tokens + $9,
           output_tokens = output_tokens + $10, cached_lines = cached_lines + $14,
           cached_output_tokens = cached_output_tokens + $15, lease_until = now() + make_interval(secs => $11)
         WHERE batch_id = $1 AND idx = $2 AND epoch = $3 AND checkpoints = $4 AND state = 'running' RETURNING batch_id, model),
       m AS (
         UPDATE batch_models SET completed = completed + $6, failed = failed + $7, input_tokens = input_tokens + $8,
           cached_tokens = cached_tokens + $9, output_tokens = output_tokens + $10,
           spot_seconds = spot_seconds + $12, dedicated_seconds = dedicated_seconds + $13,
           cached_lines = cached_lines + $14, cached_output_tokens = cached_output_tokens + $15
         WHERE (batch_id, model) = (SELECT batch_id, model FROM s))
       UPDATE batches SET completed = completed + $6, failed = failed + $7, input_tokens = input_tokens + $8,
         cached_tokens = cached_tokens + $9, output_tokens = output_tokens + $10,
         spot_seconds = spot_seconds + $12, dedicated_seconds = dedicated_seconds + $13,
         cached_lines = cached_lines + $14, cached_output_tokens = cached_output_tokens + $15
       WHERE id = (SELECT batch_id FROM s) RETURNING 1`,
      [
        s.batchId,
        s.idx,
        s.epoch,
        s.checkpoints,
        JSON.stringify(c.part.output || c.part.errors ? [c.part] : []),
        c.completed,
        c.failed,
        c.usage.promptTokens,
        c.usage.cachedTokens,
        c.usage.completionTokens,
        leaseSeconds,
        s.pool === "spot" ? (c.seconds ?? 0) : 0,
        s.pool === "dedicated" ? (c.seconds ?? 0) : 0,
        c.cached?.lines ?? 0,
        c.cached?.outputTokens ?? 0,
      ],
    );
    if (rows.length > 0) return "committed";
    return (await this.landed(s, c.part)) ? "committed" : "fenced";
  }

  async slaSnapshot(): Promise<Omit<SlaSnapshot, "workers">> {
    const open = "b.stop_reason IS NULL AND b.status IN ('validating', 'in_progress') AND (b.doc->>'paused_at') IS NULL";
    const [shards, batches] = await Promise.all([
      this.db.query(
        `SELECT s.batch_id, s.idx, s.model, s.state, s.worker_id, b.submitted_at, b.deadline_at
         FROM shards s JOIN batches b ON b.id = s.batch_id WHERE ${open} AND s.state IN ('queued', 'running')`,
      ),
      this.db.query(
        `SELECT id, (doc->'request_counts'->>'total')::int AS total, completed + failed AS done,
                (doc->>'in_progress_at')::bigint AS in_progress_at, deadline_at
         FROM batches b WHERE ${open}`,
      ),
    ]);
    return {
      shards: shards.rows.map((r) => ({
        batchId: r.batch_id,
        idx: r.idx,
        model: r.model,
        state: r.state,
        workerId: r.worker_id,
        submittedAt: Number(r.submitted_at),
        deadlineAt: Number(r.deadline_at),
      })),
      batches: batches.rows.map((b) => ({
        id: b.id,
        total: Number(b.total),
        done: Number(b.done),
        inProgressAt: b.in_progress_at === null ? null : Number(b.in_progress_at),
        deadlineAt: Number(b.deadline_at),
      })),
    };
  }

  /** Marks the shard finished (every line has its result committed). */
  async finish(s: ClaimedShard): Promise<CommitResult> {
    const { rowCount } = await this.db.query(
      `UPDATE shards SET state = 'done', lease_until = NULL
       WHERE batch_id = $1 AND idx = $2 AND epoch = $3 AND checkpoints = $4 AND state = 'running'`,
      [s.batchId, s.idx, s.epoch, s.checkpoints],
    );
    if (rowCount) return "committed";
    const { rows } = await this.db.query("SELECT state, epoch FROM shards WHERE batch_id = $1 AND idx = $2", [s.batchId, s.idx]);
    return rows[0]?.state === "done" && rows[0].epoch === s.epoch ? "committed" : "fenced";
  }

  /** Gives the shard back to the queue at once (a shutdown or preemption after its last checkpoint). */
  async handBack(s: ClaimedShard): Promise<void> {
    await this.db.query(
      `UPDATE shards SET state = 'queued', worker_id = NULL, lease_until = NULL
       WHERE batch_id = $1 AND idx = $2 AND epoch = $3 AND state = 'running'`,
      [s.batchId, s.idx, s.epoch],
    );
  }

  /**
   * Puts shards whose lease lapsed (their worker died or lost the database) back in the queue, raising the epoch
   * so their old worker is fenced even before another takes them. Returns how many. Nothing while the server
   * started less than `graceSeconds` ago: a restart kept every worker from renewing its leases.
   */
  async reap(graceSeconds: number): Promise<number> {
    const { rowCount } = await this.db.query(
      `UPDATE shards s SET state = 'queued', worker_id = NULL, lease_until = NULL, epoch = epoch + 1
       WHERE state = 'running' AND ${LAPSED("$1")}`,
      [graceSeconds],
    );
    return rowCount ?? 0;
  }

  /** Every shard of a batch, in order (finalizing assembles their parts). */
  async ofBatch(batchId: string): Promise<ShardView[]> {
    const { rows } = await this.db.query(
      `SELECT idx, state, parts, total, worker_id AS "workerId", completed, failed FROM shards WHERE batch_id = $1 ORDER BY idx`,
      [batchId],
    );
    return rows;
  }

  /**
   * One transaction, the batch's row locked against a concurrent extension: the order kept is the order answered.
   * A batch of one shard has one order, nothing to keep.
   */
  async outputOrder(batchId: string): Promise<OutputOrder | undefined> {
    const one = await this.db.query(
      "SELECT s.idx, s.completed, s.parts, (SELECT count(*) FROM shards t WHERE t.batch_id = $1)::int AS n FROM shards s WHERE s.batch_id = $1 AND s.idx = 0",
      [batchId],
    );
    if (one.rows[0]?.n === 1) return { entries: extendOrder([], one.rows), keys: keysOf(one.rows) };
    return inTransaction(this.db, async (c) => {
      const b = await c.query("SELECT output_order FROM batches WHERE id = $1 FOR UPDATE", [batchId]);
      if (b.rows.length === 0) return undefined;
      const had = b.rows[0].output_order as OrderEntry[];
      const shards = await c.query("SELECT idx, completed, parts FROM shards WHERE batch_id = $1 ORDER BY idx", [batchId]);
      const entries = extendOrder(had, shards.rows);
      if (orderedTotal(entries) > orderedTotal(had))
        await c.query("UPDATE batches SET output_order = $2 WHERE id = $1", [batchId, JSON.stringify(entries)]);
      return { entries, keys: keysOf(shards.rows) };
    });
  }

  /**
   * Whether a commit landed though its reply was lost: its part is among the shard's (whoever holds the shard now:
   * a successor read it as done). A commit with no part is recognised by its epoch and number alone.
   */
  private async landed(s: ClaimedShard, part: ShardPart): Promise<boolean> {
    const { rows } = await this.db.query(
      "SELECT epoch, checkpoints, parts @> $3::jsonb AS has_part FROM shards WHERE batch_id = $1 AND idx = $2",
      [s.batchId, s.idx, JSON.stringify([part])],
    );
    const r = rows[0];
    if (!r) return false;
    if (part.output || part.errors) return r.has_part === true;
    return r.epoch === s.epoch && r.checkpoints === s.checkpoints + 1;
  }
}
