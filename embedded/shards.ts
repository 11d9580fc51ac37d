// The work queue in this process's memory, with the PostgreSQL queue's guarantees: a claim raises the shard's
// epoch and a worker's checkpoints and end count only under the epoch it claimed; leases lapse by the clock and
// are reaped. Each operation runs in one synchronous step, so concurrent callers never see a shard half-claimed.
// Kept in files, only the commit that records a part is durable on return: leases are requeued when the state is
// opened again, and a shard's end is found again by its run (a run in place reads its files).

import { addCommit } from "../state/batch-doc.js";
import { extendOrder, type OrderEntry, type OutputOrder, orderedTotal, outputKeys } from "../state/output-order.js";
import {
  type ClaimedShard,
  type ClaimOptions,
  type CommitResult,
  type Heartbeat,
  type ShardCommit,
  type ShardView,
  type StopReason,
  shardKey,
  type WorkQueue,
} from "../state/ports.js";
import type { SlaSnapshot } from "../state/sla.js";
import { isUrgent } from "../state/urgency.js";
import { charge, startTags } from "../tenancy/fair-share.js";
import type { BatchEntry, MemoryState, ShardRecord } from "./state.js";

const RUNNABLE = ["validating", "in_progress"];
/** A batch whose shards are claimed to run: open, neither stopped nor paused. */
const runs = (e: BatchEntry) => !e.stopReason && !e.batch.paused_at && RUNNABLE.includes(e.batch.status);

export class MemoryWorkQueue implements WorkQueue {
  /**
   * Each batch's output order as last written where the state is kept (absent: as read back), which is all a
   * reader is given: an order extended in memory and lost to a crash could be extended otherwise after it. By
   * record, so it goes with the batch.
   */
  private readonly keptOrder = new WeakMap<BatchEntry, OrderEntry[]>();

  constructor(private readonly state: MemoryState) {}

  /**
   * Urgent shards first, by deadline, then checkpointed ones (they resume), then the keys' fair shares
   * (tenancy/fair-share.ts), then submission order; pools as the scheduler rules.
   */
  async claim(o: ClaimOptions): Promise<ClaimedShard[]> {
    const urgent = (e: BatchEntry) =>
      isUrgent({ submittedAt: e.batch.submitted_at, deadlineAt: e.batch.deadline_at }, o.now, o.urgentSeconds);
    const otherFree = this.freeSlotsOutside(o.pool, o.leaseSeconds);
    const held = this.heldBack(o);
    const holding = new Set((o.holding ?? []).map(shardKey));
    const picks: Array<{ e: BatchEntry; s: ShardRecord; urgent: boolean }> = [];
    for (const e of this.state.batches.values()) {
      if (!runs(e)) continue;
      const u = urgent(e);
      const fits = o.pool === null || (u ? o.pool === "dedicated" || otherFree <= 0 : o.pool === "spot" || otherFree <= 0);
      if (!fits || held.has(e.batch.id)) continue;
      for (const s of e.shards) {
        const mine = holding.has(shardKey({ batchId: e.batch.id, idx: s.idx }));
        if (!mine && o.models.includes(s.model) && this.claimable(s, o.takeLapsed ?? true)) picks.push({ e, s, urgent: u });
      }
    }
    const tags = startTags(picks, (p) => p.e.owner, this.state.shares);
    picks.sort(
      (a, b) =>
        Number(b.urgent) - Number(a.urgent) ||
        Number(b.s.parts.length > 0) - Number(a.s.parts.length > 0) ||
        (a.urgent && b.urgent ? a.e.batch.deadline_at - b.e.batch.deadline_at : 0) ||
        tags.get(a)! - tags.get(b)! ||
        a.e.seq - b.e.seq ||
        a.s.idx - b.s.idx,
    );
    const chosen = picks.slice(0, o.limit);
    charge(
      this.state.shares,
      chosen.map((p) => ({ owner: p.e.owner, tag: tags.get(p)! })),
      o.weights,
    );
    const taken = chosen.map(({ e, s, urgent: u }) => ({ ...this.take(e, s, o.workerId, o.leaseSeconds, o.pool), urgent: u }));
    this.state.saveSoon(...taken.map((s) => s.batchId));
    return taken;
  }

  async slaSnapshot(): Promise<Omit<SlaSnapshot, "workers">> {
    const open = [...this.state.batches.values()].filter(runs);
    return {
      shards: open.flatMap((e) =>
        e.shards
          .filter((s) => s.state === "queued" || s.state === "running")
          .map((s) => ({
            batchId: e.batch.id,
            idx: s.idx,
            model: s.model,
            state: s.state as "queued" | "running",
            workerId: s.workerId,
            submittedAt: e.batch.submitted_at,
            deadlineAt: e.batch.deadline_at,
          })),
      ),
      batches: open.map((e) => ({
        id: e.batch.id,
        total: e.batch.request_counts.total,
        done: e.counts.completed + e.counts.failed,
        inProgressAt: e.batch.in_progress_at,
        deadlineAt: e.batch.deadline_at,
      })),
    };
  }

  async claimStopped(workerId: string, leaseSeconds: number, limit: number): Promise<ClaimedShard[]> {
    return this.claimOutside(workerId, leaseSeconds, limit, (e) => e.stopReason !== null);
  }

  async claimUnserved(workerId: string, models: readonly string[], leaseSeconds: number, limit: number): Promise<ClaimedShard[]> {
    return this.claimOutside(workerId, leaseSeconds, limit, (e, s) => runs(e) && models.includes(s.model));
  }

  /** Unfinished shards no worker holds that `wanted` picks, in submission order, claimed outside the pools. */
  private claimOutside(
    workerId: string,
    leaseSeconds: number,
    limit: number,
    wanted: (e: BatchEntry, s: ShardRecord) => boolean,
  ): ClaimedShard[] {
    const out: ClaimedShard[] = [];
    for (const e of [...this.state.batches.values()].sort((a, b) => a.seq - b.seq)) {
      for (const s of e.shards) {
        if (out.length < limit && s.state !== "done" && wanted(e, s) && this.claimable(s))
          out.push(this.take(e, s, workerId, leaseSeconds, null));
      }
    }
    this.state.saveSoon(...out.map((s) => s.batchId));
    return out;
  }

  async heartbeat(
    workerId: string,
    shards: Array<Pick<ClaimedShard, "batchId" | "idx" | "epoch">>,
    leaseSeconds: number,
  ): Promise<Heartbeat> {
    const lost = new Set<string>();
    const stops = new Map<string, StopReason>();
    const paused = new Set<string>();
    for (const c of shards) {
      const e = this.state.batches.get(c.batchId);
      const s = e?.shards[c.idx];
      if (!e || !s || s.epoch !== c.epoch || s.workerId !== workerId || s.state !== "running") {
        lost.add(shardKey(c));
        continue;
      }
      s.leaseUntil = this.leaseEnd(leaseSeconds);
      if (e.stopReason) stops.set(c.batchId, e.stopReason);
      if (e.batch.paused_at) paused.add(c.batchId);
    }
    return { lost, stops, paused };
  }

  /** A commit retried after its reply was lost finds its own part (or, with none, its number) there: committed, once. */
  async commit(c: ClaimedShard, commit: ShardCommit, leaseSeconds: number): Promise<CommitResult> {
    const found = this.find(c);
    if (!found) return "fenced";
    const { e, s } = found;
    const { output, errors } = commit.part;
    if (output || errors) {
      if (s.parts.some((p) => p.output === output && p.errors === errors)) return "committed";
    } else if (s.epoch === c.epoch && s.checkpoints === c.checkpoints + 1) return "committed";
    if (s.epoch !== c.epoch || s.state !== "running" || s.checkpoints !== c.checkpoints) return "fenced";
    if (commit.recountable && !output && !errors) {
      this.apply(e, s, commit, leaseSeconds, c.pool);
      this.state.saveSoon(c.batchId);
      return "committed";
    }
    // Durable before applied: a commit whose record cannot be written changes nothing, so its retry (which may
    // carry more lines) is applied whole, never taken for one that landed.
    const next = structuredClone(e);
    this.apply(next, next.shards[s.idx], commit, leaseSeconds, c.pool);
    await this.state.keepBatch(c.batchId, next);
    this.apply(e, s, commit, leaseSeconds, c.pool);
    return "committed";
  }

  private apply(e: BatchEntry, s: ShardRecord, commit: ShardCommit, leaseSeconds: number, pool: ClaimedShard["pool"]): void {
    if (commit.part.output || commit.part.errors) s.parts.push(structuredClone(commit.part));
    s.checkpoints++;
    const k = s.counted;
    k.completed += commit.completed;
    k.failed += commit.failed;
    k.usage.promptTokens += commit.usage.promptTokens;
    k.usage.cachedTokens += commit.usage.cachedTokens;
    k.usage.completionTokens += commit.usage.completionTokens;
    if (commit.cached) {
      k.cached = {
        lines: (k.cached?.lines ?? 0) + commit.cached.lines,
        outputTokens: (k.cached?.outputTokens ?? 0) + commit.cached.outputTokens,
      };
    }
    s.leaseUntil = this.leaseEnd(leaseSeconds);
    addCommit(e.counts, commit, pool);
    const model = e.models?.find((m) => m.model === s.model);
    if (model) addCommit(model, commit, pool);
  }

  async finish(c: ClaimedShard): Promise<CommitResult> {
    const s = this.find(c)?.s;
    if (!s || s.epoch !== c.epoch) return "fenced";
    if (s.state === "done") return "committed";
    if (s.state !== "running" || s.checkpoints !== c.checkpoints) return "fenced";
    // The worker stays named: it is who ran the shard (the console shows it); only running shards count as its load.
    Object.assign(s, { state: "done", leaseUntil: null });
    this.state.saveSoon(c.batchId);
    return "committed";
  }

  async handBack(c: ClaimedShard): Promise<void> {
    const s = this.find(c)?.s;
    if (!s || s.epoch !== c.epoch || s.state !== "running") return;
    Object.assign(s, { state: "queued", workerId: null, leaseUntil: null });
    this.state.saveSoon(c.batchId);
  }

  /** No grace here: the state lives and dies with the process, and reopening it requeues every lease at once. */
  async reap(_graceSeconds: number): Promise<number> {
    const reaped = this.state.requeue((s) => (s.leaseUntil ?? 0) < this.state.clock());
    this.state.saveSoon(...reaped);
    return reaped.length;
  }

  async ofBatch(batchId: string): Promise<ShardView[]> {
    const e = this.state.batches.get(batchId);
    return (e?.shards ?? []).map((s) => ({
      idx: s.idx,
      state: s.state,
      parts: structuredClone(s.parts),
      total: s.total,
      workerId: s.workerId,
      completed: s.counted.completed,
      failed: s.counted.failed,
    }));
  }

  async outputOrder(batchId: string): Promise<OutputOrder | undefined> {
    const e = this.state.batches.get(batchId);
    if (!e) return undefined;
    const keys = new Map(e.shards.map((s) => [s.idx, outputKeys(s.parts)]));
    const counted = e.shards.map((s) => ({ idx: s.idx, completed: s.counted.completed }));
    // One shard's lines have one order: nothing to keep, so such a read writes nothing (on a full disk too).
    if (e.shards.length <= 1) return { entries: extendOrder([], counted), keys };
    const had = e.outputOrder ?? [];
    if (!this.keptOrder.has(e)) this.keptOrder.set(e, had);
    const next = extendOrder(had, counted);
    if (orderedTotal(next) > orderedTotal(had)) e.outputOrder = next;
    const now = e.outputOrder ?? [];
    if (orderedTotal(now) > orderedTotal(this.keptOrder.get(e)!)) {
      // Not written (a full or failing disk): the reader gets what was kept, and the rest at a later read.
      const written = await this.state.savedBatch(batchId).then(
        () => true,
        () => false,
      );
      if (written && orderedTotal(now) > orderedTotal(this.keptOrder.get(e)!)) this.keptOrder.set(e, now);
    }
    return { entries: structuredClone(this.keptOrder.get(e)!), keys };
  }

  private claimable(s: ShardRecord, takeLapsed = true): boolean {
    return s.state === "queued" || (takeLapsed && s.state === "running" && (s.leaseUntil ?? 0) < this.state.clock());
  }

  private take(e: BatchEntry, s: ShardRecord, workerId: string, leaseSeconds: number, pool: ClaimedShard["pool"]): ClaimedShard {
    Object.assign(s, { state: "running", epoch: s.epoch + 1, workerId, leaseUntil: this.leaseEnd(leaseSeconds) });
    return {
      batchId: e.batch.id,
      idx: s.idx,
      model: s.model,
      endpoint: e.batch.endpoint,
      inputKey: e.inputKey ?? "",
      byteStart: s.byteStart,
      byteEnd: s.byteEnd,
      total: s.total,
      epoch: s.epoch,
      checkpoints: s.checkpoints,
      parts: structuredClone(s.parts),
      counted: structuredClone(s.counted),
      stopReason: e.stopReason,
      deadlineAt: e.batch.deadline_at,
      urgent: false,
      pool,
    };
  }

  /**
   * Spreads a batch's shards over idle workers: the batches this worker runs more shards of than another live
   * worker of its pool that serves the model and has a free slot (that one takes their next shard). Once per claim,
   * as the PostgreSQL queue decides it.
   */
  private heldBack(o: ClaimOptions): Set<string> {
    const held = new Set<string>();
    if (o.pool === null) return held;
    const now = this.state.clock();
    const inUse = this.state.runningByWorker();
    const idle = this.state
      .liveWorkers(o.leaseSeconds)
      .filter((w) => w.id !== o.workerId && w.pool === o.pool && w.preemptedUntil < now && (inUse.get(w.id) ?? 0) < w.capacity);
    if (idle.length === 0) return held;
    for (const e of this.state.batches.values()) {
      const ofBatch = this.state.runningByWorker([e]);
      const mine = ofBatch.get(o.workerId) ?? 0;
      if (mine > 0 && idle.some((w) => w.models.includes(e.batch.model ?? "") && (ofBatch.get(w.id) ?? 0) < mine)) held.add(e.batch.id);
    }
    return held;
  }

  /** Free slots of the other pool's live, unpreempted workers (the fallback rule looks at them). */
  private freeSlotsOutside(pool: string | null, leaseSeconds: number): number {
    const now = this.state.clock();
    const inUse = this.state.runningByWorker();
    let free = 0;
    for (const w of this.state.liveWorkers(leaseSeconds))
      if (w.pool !== pool && w.preemptedUntil < now) free += w.capacity - (inUse.get(w.id) ?? 0);
    return free;
  }

  private leaseEnd(leaseSeconds: number): number {
    return this.state.clock() + leaseSeconds * 1000;
  }

  private find(c: Pick<ClaimedShard, "batchId" | "idx">): { e: BatchEntry; s: ShardRecord } | undefined {
    const e = this.state.batches.get(c.batchId);
    const s = e?.shards[c.idx];
    return e && s ? { e, s } : undefined;
  }
}
