// Batches and their shards in this process's memory (the PostgreSQL store's counterpart for one process). A status
// changes only from a status the caller names, and a batch is admitted against the open-batch bound in the same
// synchronous step that records it, so concurrent callers cannot overfill the queue.

import { type BatchFilter, matchesFilter } from "../domain/batch-search.js";
import { endedAt, isFinal } from "../domain/batch-state.js";
import { InvalidRequestError } from "../domain/errors.js";
import type { Batch, BatchStatus } from "../domain/objects.js";
import { paginate } from "../domain/paginate.js";
import type { Owner, Page } from "../domain/ports.js";
import { type UsageRecord, usageRecordOf } from "../domain/usage.js";
import { modelCountsOf, noCounts, withCounts } from "../state/batch-doc.js";
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
import type { BatchEntry, MemoryState } from "./state.js";

const isOpen = (e: BatchEntry) => OPEN_STATUSES.includes(e.batch.status);

export function rowOf(e: BatchEntry): BatchRow {
  const row: BatchRow = {
    // A copy: the caller holds a snapshot, never the live record (which keeps the schema's field order).
    batch: structuredClone(withCounts(e.batch, e.counts, e.models)),
    owner: e.owner,
    seq: e.seq,
    stopReason: e.stopReason,
    inputKey: e.inputKey,
  };
  if (e.outputExpiresAfter) row.outputExpiresAfter = { ...e.outputExpiresAfter };
  if (e.webhook) row.webhook = { ...e.webhook };
  return row;
}

export class MemoryBatchRecords implements BatchRecords {
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Admitted batches whose record is being written: counted against the queue's bound, not yet listed. */
  private readonly reserved = new Map<string, BatchEntry>();

  constructor(private readonly state: MemoryState) {}

  async insert(a: NewBatchRecord): Promise<boolean> {
    const b = a.batch;
    // Counted and reserved with no await in between: no other admission runs between the two. The batch is
    // listed (and claimable) only once its record is durable: a write refused leaves nothing behind.
    if (a.maxQueued !== undefined && b.status === "validating" && !queueRoom(this.countQueued(), a.owner, a.maxQueued).admit) return false;
    if (b.status === "validating") this.checkTokenLimits(a);
    if (this.state.batches.has(b.id) || this.reserved.has(b.id)) throw new Error(`batch ${b.id} already exists`);
    const entry: BatchEntry = {
      enqueued: b.status === "validating" ? (a.enqueued ?? null) : null,
      batch: structuredClone(b),
      owner: a.owner,
      seq: this.state.nextSeq(),
      stopReason: null,
      inputKey: a.inputKey,
      webhook: a.webhook ?? null,
      counts: noCounts(),
      shards: a.shards.map((s, idx) => ({
        idx,
        model: s.model ?? b.model ?? "",
        byteStart: s.byteStart,
        byteEnd: s.byteEnd,
        total: s.total,
        state: "queued",
        epoch: 0,
        checkpoints: 0,
        workerId: null,
        leaseUntil: null,
        parts: [],
        counted: { completed: 0, failed: 0, usage: { promptTokens: 0, cachedTokens: 0, completionTokens: 0 } },
      })),
    };
    const models = modelCountsOf(a.shards, b.model);
    if (models) entry.models = models;
    if (a.outputExpiresAfter) entry.outputExpiresAfter = { ...a.outputExpiresAfter };
    this.reserved.set(b.id, entry);
    try {
      await this.state.keepBatch(b.id, entry);
    } catch (err) {
      this.reserved.delete(b.id);
      // Whatever the refused write left (its folder) goes; the record was never there.
      await this.state.savedBatch(b.id).catch(() => undefined);
      throw err;
    }
    this.reserved.delete(b.id);
    this.state.batches.set(b.id, entry);
    this.state.addTotals(endTotals(null, b, a.owner));
    return true;
  }

  async get(id: string, owner?: Owner): Promise<BatchRow | undefined> {
    const e = this.state.batches.get(id);
    if (!e || (owner !== undefined && e.owner !== owner)) return undefined;
    return rowOf(e);
  }

  /** Newest first, as OpenAI lists batches. */
  async list(q: { after?: string; limit: number; owner: Owner | undefined }): Promise<Page<Batch>> {
    const mine = this.newestOf(q.owner);
    const page = paginate(mine, (e) => e.batch.id, q);
    return { data: page.data.map((e) => rowOf(e).batch), has_more: page.has_more };
  }

  async search(
    q: BatchFilter & { after?: string; limit: number; owner: Owner | undefined },
  ): Promise<Page<{ batch: Batch; inputFilename: string | null; owner: Owner }>> {
    const mine = this.newestOf(q.owner);
    let start = 0;
    if (q.after) {
      start = mine.findIndex((e) => e.batch.id === q.after) + 1;
      if (start === 0) throw new InvalidRequestError(`No object found with id '${q.after}' to list after.`, "invalid_request", "after");
    }
    const limit = Math.max(1, Math.floor(q.limit));
    const data: Array<{ batch: Batch; inputFilename: string | null; owner: Owner }> = [];
    for (const e of mine.slice(start)) {
      const filename = this.state.files.get(e.batch.input_file_id)?.object.filename ?? null;
      if (!matchesFilter(e.batch, filename, q)) continue;
      if (data.length === limit) return { data, has_more: true };
      data.push({ batch: rowOf(e).batch, inputFilename: filename, owner: e.owner });
    }
    return { data, has_more: false };
  }

  /** Throws TokenLimitReached where the owner's open batches (those being recorded too) and this one pass a limit. */
  private checkTokenLimits(a: NewBatchRecord): void {
    checkTokenLimits(a.tokenLimits ?? {}, a.enqueued, (model) => {
      let held = 0;
      for (const entries of [this.state.batches, this.reserved])
        for (const e of entries.values()) if (e.owner === a.owner && isOpen(e)) held += e.enqueued?.[model] ?? 0;
      return held;
    });
  }

  async enqueued(): Promise<EnqueuedTokens[]> {
    const sums = new Map<string, EnqueuedTokens>();
    for (const e of this.sorted()) {
      if (!isOpen(e)) continue;
      for (const [model, tokens] of Object.entries(e.enqueued ?? {})) {
        const k = JSON.stringify([e.owner, model]);
        const t = sums.get(k) ?? sums.set(k, { owner: e.owner, model, tokens: 0 }).get(k)!;
        t.tokens += tokens;
      }
    }
    return [...sums.values()];
  }

  async usage(q: { start: number; end: number }): Promise<UsageRecord[]> {
    const kept = this.sorted().flatMap((e) => usageRecordOf(rowOf(e).batch, e.owner) ?? []);
    return [...kept, ...this.state.usageArchive.values()].filter((r) => r.endedAt >= q.start && r.endedAt < q.end);
  }

  async keepUsage(record: UsageRecord): Promise<void> {
    await this.state.archiveUsage(record);
  }

  async queuedCount(): Promise<number> {
    let n = 0;
    for (const held of this.countQueued().values()) n += held;
    return n;
  }

  async queuedByOwner(): Promise<Map<string, number>> {
    return this.countQueued();
  }

  /** Queued batches by owner, those being recorded too. */
  private countQueued(): Map<string, number> {
    const by = new Map<string, number>();
    for (const entries of [this.state.batches, this.reserved])
      for (const e of entries.values())
        if (e.batch.status === "validating" && !e.stopReason) by.set(shareKey(e.owner), (by.get(shareKey(e.owner)) ?? 0) + 1);
    return by;
  }

  /**
   * One change of a batch at a time (a row lock), and the change is shown only once it is kept: a status a
   * client reads is the status the state's files have. When it cannot be kept, nothing changes and this throws.
   */
  async webhooksDue(now: number, limit: number): Promise<Array<{ id: string; owner: Owner; webhook: WebhookState }>> {
    const due = [];
    for (const e of this.state.batches.values()) {
      const w = e.webhook;
      if (w && w.delivered_at === null && !w.gave_up && w.next_at <= now) due.push({ id: e.batch.id, owner: e.owner, webhook: { ...w } });
    }
    return due.sort((a, b) => a.webhook.next_at - b.webhook.next_at).slice(0, limit);
  }

  /** Under the batch's lock, as every change of its record. */
  setWebhook(id: string, webhook: WebhookState): Promise<void> {
    const before = this.locks.get(id) ?? Promise.resolve();
    const mine = before
      .catch(() => undefined)
      .then(async () => {
        const e = this.state.batches.get(id);
        if (!e) return;
        await this.state.keepBatch(id, { ...e, webhook: { ...webhook } });
        const live = this.state.batches.get(id);
        if (live) this.state.batches.set(id, { ...live, webhook: { ...webhook } });
      });
    this.locks.set(id, mine);
    const forget = () => {
      if (this.locks.get(id) === mine) this.locks.delete(id);
    };
    mine.then(forget, forget);
    return mine;
  }

  async totals(): Promise<Totals> {
    return Object.fromEntries(this.state.totals);
  }

  update(id: string, from: readonly BatchStatus[], change: (row: BatchRow) => unknown): Promise<BatchRow | undefined> {
    const before = this.locks.get(id) ?? Promise.resolve();
    const mine = before
      .catch(() => undefined)
      .then(async () => {
        const e = this.state.batches.get(id);
        if (!e || !from.includes(e.batch.status)) return undefined;
        const row = rowOf(e);
        const was = e.batch.status;
        if (change(row) === false) return undefined;
        // The counts are the checkpoints' to change; everything else in the document is the writer's.
        const { request_counts, usage, usage_by_model: _, ...rest } = structuredClone(row.batch);
        const apply = (x: BatchEntry): BatchEntry => ({
          ...x,
          batch: { ...x.batch, ...rest, request_counts: { ...x.batch.request_counts, total: request_counts.total } },
          stopReason: row.stopReason,
          webhook: row.webhook ?? x.webhook ?? null,
        });
        await this.state.keepBatch(id, apply(e));
        // Checkpoints may have added counts meanwhile: the change goes onto the entry as it is now.
        const live = this.state.batches.get(id);
        if (live) this.state.batches.set(id, apply(live));
        this.state.addTotals(endTotals(was, row.batch, row.owner));
        return row;
      });
    this.locks.set(id, mine);
    const forget = () => {
      if (this.locks.get(id) === mine) this.locks.delete(id);
    };
    mine.then(forget, forget);
    return mine;
  }

  /**
   * Each expiry is decided under the batch's lock, as a cancel is: a cancel whose change is being written when the
   * deadline passes wins, and the expiry finds the batch stopped (one ordered decision, its error lines included).
   */
  async expireDue(now: number): Promise<string[]> {
    const candidates = [...this.state.batches.values()]
      .filter((e) => isOpen(e) && e.batch.status !== "finalizing" && !e.stopReason && e.batch.deadline_at <= now)
      .map((e) => e.batch.id);
    const due: string[] = [];
    for (const id of candidates) {
      const row = await this.update(id, ["validating", "in_progress"], (r) => {
        if (r.stopReason || r.batch.deadline_at > now) return false;
        r.stopReason = "expired";
      });
      if (row) due.push(id);
    }
    return due;
  }

  async readyToFinish(limit = 100): Promise<string[]> {
    return this.sorted()
      .filter((e) => isOpen(e) && e.shards.every((s) => s.state === "done"))
      .slice(0, limit)
      .map((e) => e.batch.id);
  }

  async settleCounts(id: string): Promise<void> {
    const e = this.state.batches.get(id);
    if (!e) return;
    e.counts.failed = Math.max(e.counts.failed, e.batch.request_counts.total - e.counts.completed);
    for (const m of e.models ?? []) m.failed = Math.max(m.failed, m.total - m.completed);
    await this.state.savedBatch(id);
  }

  async endedBefore(before: number, limit = 500): Promise<string[]> {
    return (
      this.sorted()
        // A batch that failed validation has no end stamp: it ended when it was created.
        .filter((e) => isFinal(e.batch.status) && (endedAt(e.batch) ?? e.batch.created_at) <= before)
        .slice(0, limit)
        .map((e) => e.batch.id)
    );
  }

  async remove(id: string): Promise<{ orphanInput?: string }> {
    const e = this.state.batches.get(id);
    if (!e) return {};
    // Its usage outlives it (the usage and costs APIs report what was used, whatever was deleted since).
    const record = usageRecordOf(rowOf(e).batch, e.owner);
    if (record) await this.state.archiveUsage(record);
    await this.state.keepBatch(id, null);
    this.state.batches.delete(id);
    const key = e.inputKey;
    if (!key) return {};
    const used =
      [...this.state.files.values()].some((f) => f.key === key) || [...this.state.batches.values()].some((b) => b.inputKey === key);
    return used ? {} : { orphanInput: key };
  }

  /** The owner's batches (every owner's: undefined), newest first. */
  private newestOf(owner: Owner | undefined): BatchEntry[] {
    return this.sorted()
      .filter((e) => owner === undefined || e.owner === owner)
      .reverse();
  }

  private sorted(): BatchEntry[] {
    return [...this.state.batches.values()].sort((a, b) => a.seq - b.seq);
  }
}
