// Batches and their shards in PostgreSQL. A status changes only from the status the caller read (conditional
// updates under a row lock), so two processes deciding at once cannot both end a batch. request_counts and
// usage are columns that shard checkpoints add to: the Batch read back is the document with them merged in.

import { type BatchFilter, searchWords } from "../domain/batch-search.js";
import { InvalidRequestError } from "../domain/errors.js";
import { type Batch, BatchSchema, type BatchStatus } from "../domain/objects.js";
import type { Owner, Page } from "../domain/ports.js";
import { type UsageRecord, usageRecordOf } from "../domain/usage.js";
import { type LiveCounts, type ModelCounts, modelCountsOf, withCounts } from "../state/batch-doc.js";
import {
  type BatchRecords,
  type BatchRow,
  type EnqueuedTokens,
  type NewBatchRecord,
  OPEN_STATUSES,
  type WebhookState,
} from "../state/ports.js";
import { endTotals, type Totals } from "../state/totals.js";
import { queueRoom, shareKey } from "../tenancy/fair-share.js";
import { checkTokenLimits } from "../tenancy/key-limits.js";
import { type Db, inTransaction, LOCKS } from "./db.js";

/** When a batch ended (as the usage index has it). */
const ENDED = `coalesce((doc->>'completed_at')::bigint, (doc->>'failed_at')::bigint, (doc->>'expired_at')::bigint,
  (doc->>'cancelled_at')::bigint)`;

const COUNTS =
  "completed, failed, input_tokens, cached_tokens, output_tokens, cached_lines, cached_output_tokens, spot_seconds, dedicated_seconds";
const OWN = `id, seq, owner, status, stop_reason, input_key, output_expires_after, ${COUNTS}, doc, webhook`;

/** A batch row's columns (`b`: the alias its query gives batches), with its models' counts where it has several. */
const columns = (b = "batches") =>
  `${OWN.replace(/(\w+)/g, `${b}.$1`)}, (SELECT jsonb_agg(m ORDER BY m.ord) FROM batch_models m WHERE m.batch_id = ${b}.id) AS models`;
const COLUMNS = columns();

const countsOf = (r: any): LiveCounts => ({
  completed: Number(r.completed),
  failed: Number(r.failed),
  inputTokens: Number(r.input_tokens),
  cachedTokens: Number(r.cached_tokens),
  outputTokens: Number(r.output_tokens),
  cachedLines: Number(r.cached_lines),
  cachedOutputTokens: Number(r.cached_output_tokens),
  spotSeconds: Number(r.spot_seconds),
  dedicatedSeconds: Number(r.dedicated_seconds),
});

function fromRow(r: any): BatchRow {
  const models: ModelCounts[] | undefined = r.models?.map((m: any) => ({ model: m.model, total: Number(m.total), ...countsOf(m) }));
  // Parsed back through the schema: jsonb keeps keys in its own order, clients get OpenAI's.
  const batch = BatchSchema.parse(withCounts({ ...r.doc, status: r.status }, countsOf(r), models));
  const row: BatchRow = { batch, owner: r.owner, seq: Number(r.seq), stopReason: r.stop_reason, inputKey: r.input_key };
  if (r.output_expires_after) row.outputExpiresAfter = r.output_expires_after;
  if (r.webhook) row.webhook = r.webhook;
  return row;
}

async function addTotals(c: { query: Db["query"] }, adds: Array<[string, number]>): Promise<void> {
  if (adds.length === 0) return;
  await c.query(
    `INSERT INTO totals (name, value) SELECT * FROM unnest($1::text[], $2::bigint[])
     ON CONFLICT (name) DO UPDATE SET value = totals.value + EXCLUDED.value`,
    [adds.map(([n]) => n), adds.map(([, v]) => v)],
  );
}

/** Throws TokenLimitReached where the owner's open batches and this one pass a limit. */
async function checkHeldTokens(c: { query: Db["query"] }, a: NewBatchRecord, models: string[]): Promise<void> {
  const { rows } = await c.query(
    `SELECT e.key AS model, sum(e.value::bigint) AS n FROM batches b, jsonb_each_text(b.enqueued) e
      WHERE b.owner IS NOT DISTINCT FROM $1 AND b.status = ANY($2) AND b.enqueued IS NOT NULL AND e.key = ANY($3)
      GROUP BY e.key`,
    [a.owner, OPEN_STATUSES, models],
  );
  const held = new Map(rows.map((r) => [r.model as string, Number(r.n)]));
  checkTokenLimits(a.tokenLimits ?? {}, a.enqueued, (model) => held.get(model) ?? 0);
}

const QUEUED = "SELECT count(*)::int AS n FROM batches WHERE status = 'validating' AND stop_reason IS NULL";

/** Queued batches by owner (fair-share.ts's shareKey). */
async function queuedBy(c: { query: Db["query"] }): Promise<Map<string, number>> {
  const { rows } = await c.query(
    "SELECT owner, count(*)::int AS n FROM batches WHERE status = 'validating' AND stop_reason IS NULL GROUP BY owner",
  );
  return new Map(rows.map((r) => [shareKey(r.owner), r.n as number]));
}

export class PgBatchRecords implements BatchRecords {
  constructor(private readonly db: Db) {}

  /**
   * Records a new batch and its shards in one transaction. With `maxQueued`, a batch is admitted only while fewer
   * are queued, counted under a lock that every API server's admission takes: returns false (nothing recorded)
   * when the queue is full.
   */
  async insert(a: NewBatchRecord): Promise<boolean> {
    const b = a.batch;
    return inTransaction(this.db, async (c) => {
      const limited = Object.keys(a.tokenLimits ?? {});
      if ((a.maxQueued !== undefined || limited.length > 0) && b.status === "validating") {
        // Every API server's admission takes this lock: two creates cannot both read the room only one has.
        await c.query("SELECT pg_advisory_xact_lock($1)", [LOCKS.admission]);
        if (a.maxQueued !== undefined && !queueRoom(await queuedBy(c), a.owner, a.maxQueued).admit) return false;
        if (limited.length > 0) await checkHeldTokens(c, a, limited);
      }
      await c.query(
        `INSERT INTO batches (id, owner, status, model, submitted_at, deadline_at, input_key, output_expires_after, doc, webhook, enqueued)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [
          b.id,
          a.owner,
          b.status,
          b.model,
          b.submitted_at,
          b.deadline_at,
          a.inputKey,
          a.outputExpiresAfter ?? null,
          b,
          a.webhook ?? null,
          b.status === "validating" ? (a.enqueued ?? null) : null,
        ],
      );
      // One statement for all shards: a 50,000-line batch has 50 of them, a 5-million-line one 5,000.
      if (a.shards.length > 0)
        await c.query(
          `INSERT INTO shards (batch_id, idx, model, byte_start, byte_end, total)
           SELECT $1, i - 1, m, s, e, t FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::int[]) WITH ORDINALITY AS x(m, s, e, t, i)`,
          [
            b.id,
            a.shards.map((s) => s.model ?? b.model),
            a.shards.map((s) => s.byteStart),
            a.shards.map((s) => s.byteEnd),
            a.shards.map((s) => s.total),
          ],
        );
      const models = modelCountsOf(a.shards, b.model);
      if (models)
        await c.query(
          `INSERT INTO batch_models (batch_id, model, ord, total)
           SELECT $1, m, i, t FROM unnest($2::text[], $3::bigint[]) WITH ORDINALITY AS x(m, t, i)`,
          [b.id, models.map((m) => m.model), models.map((m) => m.total)],
        );
      // A batch whose file failed validation ends as it is recorded.
      await addTotals(c, endTotals(null, b, a.owner));
      return true;
    });
  }

  async get(id: string, owner?: Owner): Promise<BatchRow | undefined> {
    const { rows } = await this.db.query(
      `SELECT ${COLUMNS} FROM batches WHERE id = $1 AND ($2::boolean OR owner IS NOT DISTINCT FROM $3)`,
      [id, owner === undefined, owner ?? null],
    );
    return rows[0] && fromRow(rows[0]);
  }

  /** The position a page starts after: the cursor batch's seq (it must be this owner's), or null for the newest. */
  private async seqAfter(q: { after?: string; owner: Owner | undefined }): Promise<number | null> {
    if (!q.after) return null;
    const after = await this.get(q.after, q.owner);
    if (!after) throw new InvalidRequestError(`No object found with id '${q.after}' to list after.`, "invalid_request", "after");
    return after.seq;
  }

  /** Newest first, as OpenAI lists batches. */
  async list(q: { after?: string; limit: number; owner: Owner | undefined }): Promise<Page<Batch>> {
    const afterSeq = await this.seqAfter(q);
    const limit = Math.max(1, Math.floor(q.limit));
    const { rows } = await this.db.query(
      `SELECT ${COLUMNS} FROM batches WHERE ($4::boolean OR owner IS NOT DISTINCT FROM $1) AND ($2::bigint IS NULL OR seq < $2)
       ORDER BY seq DESC LIMIT $3`,
      [q.owner ?? null, afterSeq, limit + 1, q.owner === undefined],
    );
    return { data: rows.slice(0, limit).map((r) => fromRow(r).batch), has_more: rows.length > limit };
  }

  async search(
    q: BatchFilter & { after?: string; limit: number; owner: Owner | undefined },
  ): Promise<Page<{ batch: Batch; inputFilename: string | null; owner: Owner }>> {
    const afterSeq = await this.seqAfter(q);
    const limit = Math.max(1, Math.floor(q.limit));
    const params: unknown[] = [q.owner ?? null, afterSeq, q.status ?? null, q.model ?? null, q.endpoint ?? null, limit + 1];
    const param = (v: unknown) => `$${params.push(v)}`;
    const like = (text: string) => param(`%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    // A batch's metadata as an object (it may be JSON null).
    const METADATA = "CASE WHEN jsonb_typeof(b.doc->'metadata') = 'object' THEN b.doc->'metadata' ELSE '{}'::jsonb END";
    // domain/batch-search.ts's words, in SQL: a metadata entry, else a part of the id, the file name or the metadata.
    const words = searchWords(q.text).map((w) =>
      w.kind === "entry"
        ? `EXISTS (SELECT 1 FROM jsonb_each_text(${METADATA}) m WHERE lower(m.key) = ${param(w.key)} AND lower(m.value) = ${param(w.value)})`
        : `(lower(b.id) LIKE ${like(w.text)} OR lower(coalesce(f.object->>'filename', '')) LIKE $${params.length}
            OR EXISTS (SELECT 1 FROM jsonb_each_text(${METADATA}) m
                        WHERE lower(m.key) LIKE $${params.length} OR lower(m.value) LIKE $${params.length}))`,
    );
    const { rows } = await this.db.query(
      `SELECT ${columns("b")}, f.object->>'filename' AS input_filename
         FROM batches b LEFT JOIN files f ON f.id = b.doc->>'input_file_id' AND f.owner IS NOT DISTINCT FROM b.owner
        WHERE (${param(q.owner === undefined)}::boolean OR b.owner IS NOT DISTINCT FROM $1) AND ($2::bigint IS NULL OR b.seq < $2)
          AND ($3::text IS NULL OR b.status = $3) AND ($4::text IS NULL OR b.model = $4) AND ($5::text IS NULL OR b.doc->>'endpoint' = $5)
          ${words.map((w) => `AND ${w}`).join("\n          ")}
        ORDER BY b.seq DESC LIMIT $6`,
      params,
    );
    return {
      data: rows.slice(0, limit).map((r) => {
        const row = fromRow(r);
        return { batch: row.batch, inputFilename: r.input_filename ?? null, owner: row.owner };
      }),
      has_more: rows.length > limit,
    };
  }

  async queuedCount(): Promise<number> {
    const { rows } = await this.db.query(QUEUED);
    return rows[0].n;
  }

  queuedByOwner(): Promise<Map<string, number>> {
    return queuedBy(this.db);
  }

  async webhooksDue(now: number, limit: number): Promise<Array<{ id: string; owner: Owner; webhook: WebhookState }>> {
    const { rows } = await this.db.query(
      `SELECT id, owner, webhook FROM batches
        WHERE webhook IS NOT NULL AND webhook->>'delivered_at' IS NULL AND NOT (webhook->>'gave_up')::boolean
          AND (webhook->>'next_at')::bigint <= $1
        ORDER BY (webhook->>'next_at')::bigint LIMIT $2`,
      [now, limit],
    );
    return rows.map((r) => ({ id: r.id, owner: r.owner, webhook: r.webhook }));
  }

  async setWebhook(id: string, webhook: WebhookState): Promise<void> {
    await this.db.query("UPDATE batches SET webhook = $2 WHERE id = $1", [id, webhook]);
  }

  /**
   * Changes a batch under its row lock, only while its status is one of `from`: `change` edits the row read
   * (the batch, and may set the stop reason), or returns false to leave it as it is; returns the batch written, or undefined when its status was another (someone
   * else decided first) or it is gone.
   */
  async update(id: string, from: readonly BatchStatus[], change: (row: BatchRow) => unknown): Promise<BatchRow | undefined> {
    return inTransaction(this.db, async (c) => {
      const { rows } = await c.query(`SELECT ${COLUMNS} FROM batches WHERE id = $1 FOR UPDATE`, [id]);
      if (!rows[0] || !from.includes(rows[0].status)) return undefined;
      const row = fromRow(rows[0]);
      if (change(row) === false) return undefined;
      await addTotals(c, endTotals(rows[0].status, row.batch, row.owner));
      const { request_counts, usage, usage_by_model: _, ...rest } = row.batch;
      await c.query("UPDATE batches SET status = $2, stop_reason = $3, doc = $4, webhook = $5 WHERE id = $1", [
        id,
        row.batch.status,
        row.stopReason,
        { ...rest, request_counts: { ...request_counts, completed: 0, failed: 0 } },
        row.webhook ?? null,
      ]);
      return row;
    });
  }

  async enqueued(): Promise<EnqueuedTokens[]> {
    const { rows } = await this.db.query(
      `SELECT b.owner, e.key AS model, sum(e.value::bigint) AS n FROM batches b, jsonb_each_text(b.enqueued) e
        WHERE b.status = ANY($1) AND b.enqueued IS NOT NULL GROUP BY b.owner, e.key ORDER BY b.owner, e.key`,
      [OPEN_STATUSES],
    );
    return rows.map((r) => ({ owner: r.owner, model: r.model, tokens: Number(r.n) }));
  }

  async usage(q: { start: number; end: number }): Promise<UsageRecord[]> {
    const { rows } = await this.db.query(
      `SELECT ${COLUMNS} FROM batches WHERE status IN ('completed', 'failed', 'expired', 'cancelled')
         AND ${ENDED} >= $1 AND ${ENDED} < $2`,
      [q.start, q.end],
    );
    const { rows: archived } = await this.db.query("SELECT record FROM usage_archive WHERE ended_at >= $1 AND ended_at < $2", [
      q.start,
      q.end,
    ]);
    const kept = rows.flatMap((r) => {
      const row = fromRow(r);
      return usageRecordOf(row.batch, row.owner) ?? [];
    });
    return [...kept, ...archived.map((r) => r.record as UsageRecord)];
  }

  async keepUsage(record: UsageRecord): Promise<void> {
    await this.db.query(
      `INSERT INTO usage_archive (batch_id, ended_at, record) VALUES ($1, $2, $3)
         ON CONFLICT (batch_id) DO UPDATE SET ended_at = EXCLUDED.ended_at, record = EXCLUDED.record`,
      [record.batchId, record.endedAt, record],
    );
  }

  async totals(): Promise<Totals> {
    const { rows } = await this.db.query("SELECT name, value FROM totals");
    return Object.fromEntries(rows.map((r) => [r.name, Number(r.value)]));
  }

  /** completed + failed == total: requests with no result counted (a part lost to a crash) are failed. */
  async settleCounts(id: string): Promise<void> {
    await this.db.query(
      `WITH m AS (UPDATE batch_models SET failed = GREATEST(failed, total - completed) WHERE batch_id = $1)
       UPDATE batches SET failed = GREATEST(failed, (doc->'request_counts'->>'total')::bigint - completed) WHERE id = $1`,
      [id],
    );
  }

  /** Batches that ended (or failed validation) before `before` (unix seconds): due for removal. */
  async endedBefore(before: number, limit = 500): Promise<string[]> {
    const { rows } = await this.db.query(
      `SELECT id FROM batches WHERE status IN ('completed', 'failed', 'expired', 'cancelled')
         AND coalesce(${ENDED}, (doc->>'created_at')::bigint) <= $1
       ORDER BY seq LIMIT $2`,
      [before, limit],
    );
    return rows.map((r) => r.id);
  }

  /**
   * Deletes a batch and its shards (their rows; the caller removes the objects). Returns its input's key when
   * nothing else needs it any more (its file was deleted while the batch ran, and no other batch reads it).
   */
  async remove(id: string): Promise<{ orphanInput?: string }> {
    const rows = await inTransaction(this.db, async (c) => {
      // Its usage outlives it (the usage and costs APIs report what was used, whatever was deleted since).
      const { rows: kept } = await c.query(`SELECT ${COLUMNS} FROM batches WHERE id = $1 FOR UPDATE`, [id]);
      const row = kept[0] && fromRow(kept[0]);
      const record = row && usageRecordOf(row.batch, row.owner);
      if (record)
        await c.query("INSERT INTO usage_archive (batch_id, ended_at, record) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", [
          id,
          record.endedAt,
          record,
        ]);
      return (await c.query("DELETE FROM batches WHERE id = $1 RETURNING input_key", [id])).rows;
    });
    const key: string | null = rows[0]?.input_key ?? null;
    if (!key) return {};
    const { rows: users } = await this.db.query(
      "SELECT 1 FROM files WHERE blob_key = $1 UNION ALL SELECT 1 FROM batches WHERE input_key = $1 LIMIT 1",
      [key],
    );
    return users.length === 0 ? { orphanInput: key } : {};
  }

  /** Open batches whose deadline passed and that no one stopped yet: they stop now, as expired. */
  async expireDue(now: number): Promise<string[]> {
    const { rows } = await this.db.query(
      `UPDATE batches SET stop_reason = 'expired' WHERE status = ANY($1) AND status <> 'finalizing' AND stop_reason IS NULL
         AND deadline_at <= $2 RETURNING id`,
      [OPEN_STATUSES, now],
    );
    return rows.map((r) => r.id);
  }

  /** Open batches none of whose shards is still to run: ready to be finalized (or ended, when stopped). */
  async readyToFinish(limit = 100): Promise<string[]> {
    const { rows } = await this.db.query(
      `SELECT b.id FROM batches b WHERE b.status = ANY($1)
         AND NOT EXISTS (SELECT 1 FROM shards s WHERE s.batch_id = b.id AND s.state <> 'done') ORDER BY b.seq LIMIT $2`,
      [OPEN_STATUSES, limit],
    );
    return rows.map((r) => r.id);
  }
}
