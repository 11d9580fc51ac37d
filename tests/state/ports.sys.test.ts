// The distributed mode's ports and their guarantees, one contract for each implementation: PostgreSQL (a real
// throwaway database) and one process's memory. Claims never overlap, a claim fences the previous holder (epoch),
// a commit retried after its reply was lost counts once, lapsed leases go back to the queue, the scheduler's pool
// rules (spot first, urgent to dedicated, fallback) hold across workers, and status changes are conditional.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { singleModelRegistry } from "../../backends/registry.js";
import { newBatchObject } from "../../domain/batch-object.js";
import type { UsageRecord } from "../../domain/usage.js";
import type { ClaimOptions, ClusterPorts } from "../../state/ports.js";
import type { FsBlobStore } from "../../stores/fs-blob-store.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { IMPLEMENTATIONS, portsLifecycle } from "../helpers/port-harness.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const usage = { promptTokens: 3, completionTokens: 2, cachedTokens: 1 };
const now = () => Math.floor(Date.now() / 1000);
/** A lease that lapses within the test (both stores take fractions of a second). */
const SHORT_LEASE = 0.3;
const lapse = () => sleep(SHORT_LEASE * 1000 + 200);
/**
 * A claim that takes a lapsed lease: with a short lease of its own, since PostgreSQL gives the workers a lease's
 * grace after the server starts (the test server has just started).
 */
const TAKER = { workerId: "b", leaseSeconds: SHORT_LEASE };

describe.each(IMPLEMENTATIONS)("the cluster ports on %s", (_name, skip, harness) => {
  const h = harness();
  let ports: ClusterPorts;
  let blobs: FsBlobStore;
  let blobDir = "";
  let n = 0;

  async function batch(
    shards: number,
    opts: { windowSeconds?: number; submittedAgo?: number; maxQueued?: number; owner?: string | null; models?: string[] } = {},
  ): Promise<string> {
    const id = `batch_${String(++n).padStart(24, "0")}`;
    const submitted = now() - (opts.submittedAgo ?? 0);
    const windowSeconds = opts.windowSeconds ?? 86_400;
    const b = newBatchObject({
      id,
      endpoint: "/v1/completions",
      completion_window: `${windowSeconds}s`,
      inputFileId: "file-x",
      created: submitted,
      windowSeconds,
      validation: { ok: true, total: shards * 10, errors: [], errorCount: 0, model: "m" },
      registry: singleModelRegistry("/models/m.gguf", false),
    });
    const plan = Array.from({ length: shards }, (_, i) => ({
      byteStart: i * 100,
      byteEnd: (i + 1) * 100,
      total: 10,
      ...(opts.models && { model: opts.models[i] }),
    }));
    const admitted = await ports.batches.insert({
      batch: b,
      owner: opts.owner ?? null,
      inputKey: "files/x.jsonl",
      shards: plan,
      maxQueued: opts.maxQueued,
    });
    return admitted ? id : "";
  }
  const claimOpts = (o: Partial<ClaimOptions> = {}): ClaimOptions => ({
    workerId: "w",
    pool: "dedicated",
    models: ["m"],
    limit: 1,
    leaseSeconds: 30,
    urgentSeconds: 600,
    now: now(),
    ...o,
  });

  portsLifecycle(h, skip, (opened, store, dir) => {
    [ports, blobs, blobDir] = [opened, store, dir];
  });

  it.skipIf(skip)("admits queued batches up to the bound, however many API servers create at once; started ones leave room", async () => {
    const ids = await Promise.all(Array.from({ length: 10 }, () => batch(1, { maxQueued: 3 })));
    expect(ids.filter(Boolean).length).toBe(3);
    expect(await ports.batches.queuedCount()).toBe(3);
    // A batch that started is no longer queued: it leaves room for one more.
    await ports.batches.update(ids.find(Boolean)!, ["validating"], (r) => {
      r.batch.status = "in_progress";
    });
    expect(await ports.batches.queuedCount()).toBe(2);
    expect(await batch(1, { maxQueued: 3 })).not.toBe("");
    expect(await batch(1, { maxQueued: 3 })).toBe("");
  });

  it.skipIf(skip)("shares the queue's places between keys: another key's batch goes into a queue one key filled", async () => {
    const [a, b] = ["a".repeat(32), "b".repeat(32)];
    // Key a fills the queue from many API servers at once; key b's one batch still goes in, past the bound.
    const filled = await Promise.all(Array.from({ length: 8 }, () => batch(1, { maxQueued: 4, owner: a })));
    expect(filled.filter(Boolean)).toHaveLength(4);
    expect(await batch(1, { maxQueued: 4, owner: b })).not.toBe("");
    expect(Object.fromEntries(await ports.batches.queuedByOwner())).toEqual({ [a]: 4, [b]: 1 });
    // a holds more than its share (2 of 4 while two keys wait); b waits for a free place.
    expect(await batch(1, { maxQueued: 4, owner: a })).toBe("");
    expect(await batch(1, { maxQueued: 4, owner: b })).toBe("");
    // Two of a's start: the place freed goes to b, never back to a.
    for (const id of filled.filter(Boolean).slice(0, 2))
      await ports.batches.update(id, ["validating"], (r) => {
        r.batch.status = "in_progress";
      });
    expect(await batch(1, { maxQueued: 4, owner: a })).toBe("");
    expect(await batch(1, { maxQueued: 4, owner: b })).not.toBe("");
    expect(await batch(1, { maxQueued: 4, owner: b })).toBe("");
    expect(Object.fromEntries(await ports.batches.queuedByOwner())).toEqual({ [a]: 2, [b]: 2 });
  });

  it.skipIf(skip)(
    "keeps a batch's output order as it is read: what a read returned stays its start, a fenced commit adds nothing",
    async () => {
      const id = await batch(3);
      const { queue } = ports;
      const [a, b, c] = await queue.claim(claimOpts({ limit: 3 }));
      expect((await queue.outputOrder(id))?.entries).toEqual([]);
      await queue.commit(b, { part: { output: "b1" }, completed: 4, failed: 0, usage }, 30);
      await queue.commit(a, { part: { output: "a1" }, completed: 2, failed: 1, usage }, 30);
      const first = (await queue.outputOrder(id))!;
      // Shard order within what was committed between two reads.
      expect(first.entries).toEqual([
        [0, 2],
        [1, 4],
      ]);
      expect(first.keys.get(0)).toEqual(["a1"]);
      // A read with nothing new changes nothing.
      expect((await queue.outputOrder(id))!.entries).toEqual(first.entries);
      await queue.commit({ ...a, checkpoints: 1 }, { part: { output: "a2" }, completed: 3, failed: 0, usage }, 30);
      await queue.commit(c, { part: { errors: "c1" }, completed: 0, failed: 5, usage }, 30);
      // The stale claim of shard 1 (an old epoch) commits nothing, so orders nothing.
      expect(await queue.commit({ ...b, epoch: 0 }, { part: { output: "bx" }, completed: 9, failed: 0, usage }, 30)).toBe("fenced");
      const second = (await queue.outputOrder(id))!;
      expect(second.entries).toEqual([
        [0, 2],
        [1, 4],
        [0, 5],
      ]);
      expect(second.keys.get(0)).toEqual(["a1", "a2"]);
      expect(second.keys.get(2)).toEqual([]);
      expect(await queue.outputOrder("batch_none")).toBeUndefined();
    },
  );

  it.skipIf(skip)("hands each shard to one claimer, however many claim at once", async () => {
    const id = await batch(40);
    const claimed = await Promise.all(Array.from({ length: 12 }, (_, i) => ports.queue.claim(claimOpts({ workerId: `c${i}`, limit: 5 }))));
    const keys = claimed.flat().map((s) => `${s.batchId}/${s.idx}`);
    expect(keys.length).toBe(40);
    expect(new Set(keys).size).toBe(40);
    expect(claimed.flat().every((s) => s.batchId === id && s.epoch === 1)).toBe(true);
  });

  it.skipIf(skip)(
    "counts a commit once when it is retried after its reply was lost, and fences a worker whose shard was taken over",
    async () => {
      const id = await batch(1);
      const { queue, batches } = ports;
      const [s] = await queue.claim(claimOpts({ workerId: "a", leaseSeconds: SHORT_LEASE }));
      const commit = { part: { output: "p1" }, completed: 4, failed: 1, usage };
      expect(await queue.commit({ ...s }, commit, SHORT_LEASE)).toBe("committed");
      // The same commit again (the worker never saw the first reply): recognised, not applied twice.
      expect(await queue.commit({ ...s }, commit, SHORT_LEASE)).toBe("committed");
      let row = (await batches.get(id))!;
      expect(row.batch.request_counts).toMatchObject({ completed: 4, failed: 1 });
      expect(row.batch.usage).toMatchObject({ input_tokens: 3, output_tokens: 2, input_tokens_details: { cached_tokens: 1 } });
      // The lease lapses and another worker takes the shard: the first can commit and finish nothing more.
      await lapse();
      const [taken] = await queue.claim(claimOpts(TAKER));
      expect(taken.epoch).toBe(2);
      expect(taken.parts).toEqual([{ output: "p1" }]);
      // What the shard's commits counted comes with it (a run in place commits only what it finds beyond that).
      expect(taken.counted).toEqual({ completed: 4, failed: 1, usage });
      const stale = { ...s, checkpoints: 1 };
      expect(await queue.commit(stale, { ...commit, part: { output: "p2" } }, 30)).toBe("fenced");
      expect(await queue.finish(stale)).toBe("fenced");
      const beat = await queue.heartbeat("a", [s], 30);
      expect([...beat.lost]).toEqual([`${id}/0`]);
      row = (await batches.get(id))!;
      expect(row.batch.request_counts).toMatchObject({ completed: 4, failed: 1 });
      expect(await queue.finish(taken)).toBe("committed");
      expect(await batches.readyToFinish()).toContain(id);
    },
  );

  it.skipIf(skip)(
    "refuses a different commit under a number that already landed, and recognises a lost commit by its part after a takeover",
    async () => {
      const id = await batch(1);
      const { queue, batches } = ports;
      const [s] = await queue.claim(claimOpts({ workerId: "a", leaseSeconds: SHORT_LEASE }));
      const first = { part: { output: "a-1" }, completed: 3, failed: 0, usage };
      expect(await queue.commit({ ...s }, first, SHORT_LEASE)).toBe("committed");
      // The worker never heard, and (as before the fix) sends more lines under the same number: not counted.
      const bigger = { part: { output: "a-1b" }, completed: 5, failed: 0, usage };
      expect(await queue.commit({ ...s }, bigger, SHORT_LEASE)).toBe("fenced");
      let row = (await batches.get(id))!;
      expect(row.batch.request_counts).toMatchObject({ completed: 3, failed: 0 });
      // Taken over: the lost commit is still recognised by its own part (it counts, and its object must stay).
      await lapse();
      const [taken] = await queue.claim(claimOpts(TAKER));
      expect(taken.parts).toEqual([{ output: "a-1" }]);
      expect(await queue.commit({ ...s }, first, SHORT_LEASE)).toBe("committed");
      // A commit that never landed, sent after the takeover, is refused and counts nothing.
      expect(await queue.commit({ ...s, checkpoints: 1 }, { ...first, part: { output: "a-2" } }, SHORT_LEASE)).toBe("fenced");
      row = (await batches.get(id))!;
      expect(row.batch.request_counts).toMatchObject({ completed: 3, failed: 0 });
      expect((await queue.ofBatch(id))[0].parts).toEqual([{ output: "a-1" }]);
    },
  );

  it.skipIf(skip)("puts lapsed leases back in the queue with a new epoch; a hand-back is claimable at once", async () => {
    const { queue } = ports;
    await batch(2);
    const claimed = [
      ...(await queue.claim(claimOpts({ workerId: "dead", leaseSeconds: SHORT_LEASE }))),
      ...(await queue.claim(claimOpts({ workerId: "dead" }))),
    ];
    await lapse();
    expect(await queue.reap(0)).toBe(1);
    await queue.handBack(claimed[1]);
    const again = await queue.claim(claimOpts({ workerId: "alive", limit: 5 }));
    expect(again.map((s) => [s.idx, s.epoch]).sort()).toEqual([
      [0, 3],
      [1, 2],
    ]);
  });

  it.skipIf(skip)("leaves a lapsed lease to its holder when the claimer was itself cut off (takeLapsed: false)", async () => {
    const { queue } = ports;
    await batch(1);
    const [held] = await queue.claim(claimOpts({ workerId: "slow", leaseSeconds: SHORT_LEASE }));
    await lapse();
    expect(await queue.claim(claimOpts({ ...TAKER, takeLapsed: false }))).toEqual([]);
    // Its holder renews it (the heartbeat does not ask whether it lapsed), and keeps it.
    expect([...(await queue.heartbeat("slow", [held], 30)).lost]).toEqual([]);
    expect(await queue.claim(claimOpts(TAKER))).toEqual([]);
  });

  it.skipIf(skip)("never hands a worker a shard it says it runs, however late its heartbeat; another worker takes it", async () => {
    const { queue } = ports;
    await batch(1);
    const [held] = await queue.claim(claimOpts({ workerId: "slow", leaseSeconds: SHORT_LEASE }));
    await lapse();
    expect(await queue.claim(claimOpts({ workerId: "slow", leaseSeconds: SHORT_LEASE, holding: [held] }))).toEqual([]);
    const [taken] = await queue.claim(claimOpts({ ...TAKER, holding: [{ batchId: held.batchId, idx: held.idx + 1 }] }));
    expect([taken.idx, taken.epoch]).toEqual([held.idx, held.epoch + 1]);
  });

  it.skipIf(skip)("forgets workers not heard from within the retention, and lists only live ones", async () => {
    const { workers } = ports;
    await workers.register({ id: "gone", pool: "spot", capacity: 1, models: ["m"], running: [] });
    await sleep(2_100);
    await workers.register({ id: "here", pool: "spot", capacity: 1, models: ["m"], running: [] });
    expect((await workers.live(2)).map((w) => w.id)).toEqual(["here"]);
    expect(await workers.forget(2)).toBe(1);
    expect(await workers.forget(2)).toBe(0);
    expect((await workers.live(3_600)).map((w) => w.id)).toEqual(["here"]);
  });

  it.skipIf(skip)("says until when a preempted worker's slots are gone, and nothing once they are back", async () => {
    const { workers } = ports;
    await workers.register({ id: "reclaimed", pool: "spot", capacity: 2, models: ["m"], running: [] });
    await workers.register({ id: "kept", pool: "spot", capacity: 1, models: ["m"], running: [] });
    const before = now();
    await workers.preempted("reclaimed", 60);
    const live = await workers.live(30);
    const reclaimed = live.find((w) => w.id === "reclaimed")!;
    expect(reclaimed).toMatchObject({ preempted: true, preemptions: 1 });
    expect(reclaimed.preemptedUntil).toBeGreaterThanOrEqual(before + 60);
    expect(reclaimed.preemptedUntil).toBeLessThanOrEqual(now() + 61);
    expect(live.find((w) => w.id === "kept")).toMatchObject({ preempted: false, preemptedUntil: null });
    await workers.preempted("kept", 0.5);
    await sleep(1_100);
    expect((await workers.live(30)).find((w) => w.id === "kept")).toMatchObject({ preempted: false, preemptedUntil: null });
  });

  it.skipIf(skip)("adds a batch to the running totals once, as it ends, with its requests and its deadline", async () => {
    const { batches } = ports;
    const before = await batches.totals();
    const id = await batch(1);
    const end = (status: "completed" | "cancelled") =>
      batches.update(id, ["validating", "in_progress", "completed"], (r) => {
        r.batch.status = status;
        r.batch.deadline_met = true;
      });
    await batches.update(id, ["validating"], (r) => {
      r.batch.status = "in_progress";
    });
    expect(await batches.totals()).toEqual(before);
    await ports.queue.commit((await ports.queue.claim(claimOpts()))[0], { part: { output: "p" }, completed: 8, failed: 2, usage }, 30);
    await batches.settleCounts(id);
    await end("completed");
    // Changed again once ended (a webhook's state, say): nothing more is added.
    await end("completed");
    const after = await batches.totals();
    const added = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
    expect([added("batches:completed"), added("requests:completed"), added("requests:failed"), added("deadlines:met")]).toEqual([
      1, 8, 2, 1,
    ]);
  });

  it.skipIf(skip)(
    "counts a batch over several models per model: each commit under its shard's model, a retry once, the settle per model, the usage record per model, kept past a delete",
    async () => {
      const { queue, batches } = ports;
      const id = await batch(3, { models: ["m", "a1", "a1"] });
      const claim = await queue.claim(claimOpts({ models: ["m", "a1"], limit: 3, pool: "spot" }));
      const [m0, a1, a2] = [0, 1, 2].map((i) => claim.find((s) => s.idx === i)!);
      expect([m0.model, a1.model, a2.model]).toEqual(["m", "a1", "a1"]);
      const commit = (completed: number, failed: number, output: string) => ({ part: { output }, completed, failed, usage, seconds: 2 });
      await queue.commit(m0, commit(6, 1, "m0"), 30);
      await queue.commit(a1, commit(4, 0, "a1"), 30);
      // Retried after its reply was lost: counted once, for its model as for the batch.
      await queue.commit(a1, commit(4, 0, "a1"), 30);
      await queue.commit(a2, { ...commit(3, 0, "a2"), cached: { lines: 1, outputTokens: 2 } }, 30);
      for (const s of [m0, a1, a2]) expect(await queue.finish({ ...s, checkpoints: 1 })).toBe("committed");
      await batches.settleCounts(id);
      await batches.update(id, ["validating"], (r) => {
        r.batch.status = "completed";
        r.batch.completed_at = now();
      });
      const { batch: b } = (await batches.get(id))!;
      expect(b.request_counts).toEqual({ completed: 13, failed: 17, total: 30 });
      const byModel = b.usage_by_model!;
      expect(Object.keys(byModel)).toEqual(["m", "a1"]);
      expect(byModel.m.request_counts).toEqual({ completed: 6, failed: 4, total: 10 });
      expect(byModel.a1.request_counts).toEqual({ completed: 7, failed: 13, total: 20 });
      expect(byModel.a1.usage).toEqual({
        input_tokens: 6,
        input_tokens_details: { cached_tokens: 2 },
        output_tokens: 4,
        output_tokens_details: { reasoning_tokens: 0, cached_tokens: 2 },
        total_tokens: 10,
      });
      expect([byModel.a1.cached_lines, byModel.a1.engine_seconds, byModel.m.engine_seconds]).toEqual([
        1,
        { spot: 4, dedicated: 0 },
        { spot: 2, dedicated: 0 },
      ]);
      expect(b.usage.input_tokens).toBe(byModel.m.usage.input_tokens + byModel.a1.usage.input_tokens);
      const records = async () => (await batches.usage({ start: 0, end: now() + 10 })).filter((r) => r.batchId === id);
      const perModel = (rs: UsageRecord[]) => rs.flatMap((r) => r.byModel ?? []).map((m) => [m.model, m.requests, m.usage.output_tokens]);
      const kept = await records();
      expect(perModel(kept)).toEqual([
        ["m", 6, 2],
        ["a1", 7, 4],
      ]);
      await batches.remove(id);
      expect(perModel(await records())).toEqual(perModel(kept));
    },
  );

  it.skipIf(skip)("spreads a batch's shards over idle workers of the pool before one worker takes a second", async () => {
    const { queue, workers } = ports;
    const id = await batch(3);
    for (const w of ["w1", "w2", "w3"]) await workers.register({ id: w, pool: "dedicated", capacity: 2, models: ["m"], running: [] });
    const take = (workerId: string) => queue.claim(claimOpts({ workerId, limit: 1 }));
    expect((await take("w1")).map((s) => [s.batchId, s.idx])).toEqual([[id, 0]]);
    // w2 and w3 are idle: w1 passes on the batch's next shards, whose claims go to them.
    expect(await take("w1")).toEqual([]);
    expect((await take("w2")).map((s) => s.idx)).toEqual([1]);
    expect(await take("w2")).toEqual([]);
    expect((await take("w3")).map((s) => s.idx)).toEqual([2]);
    // A peer of another pool, one that serves another model, or one that is full does not hold a shard back.
    await h.reset();
    const wide = await batch(3);
    // (Ordinary work goes to spot first: w1 is a spot worker, its idle peer of the other pool a dedicated one.)
    await workers.register({ id: "w1", pool: "spot", capacity: 3, models: ["m"], running: [] });
    await workers.register({ id: "ded", pool: "dedicated", capacity: 2, models: ["m"], running: [] });
    await workers.register({ id: "other", pool: "spot", capacity: 2, models: ["x"], running: [] });
    const spot = () => queue.claim(claimOpts({ workerId: "w1", pool: "spot", limit: 1 }));
    const taken = [...(await spot()), ...(await spot()), ...(await spot())];
    expect(taken.map((s) => [s.batchId, s.idx])).toEqual([
      [wide, 0],
      [wide, 1],
      [wide, 2],
    ]);
  });

  it.skipIf(skip)("sends ordinary shards to spot and urgent ones to dedicated, each falling back when the other has no room", async () => {
    const { queue, workers } = ports;
    const ordinary = await batch(1);
    const urgent = await batch(1, { windowSeconds: 100, submittedAgo: 50 });
    await workers.register({ id: "spot-1", pool: "spot", capacity: 1, models: ["m"], running: [] });
    await workers.register({ id: "ded-1", pool: "dedicated", capacity: 1, models: ["m"], running: [] });
    // With room on spot, a dedicated worker takes only the urgent shard...
    const ded = await queue.claim(claimOpts({ workerId: "ded-1", pool: "dedicated", limit: 5 }));
    expect(ded.map((s) => [s.batchId, s.urgent])).toEqual([[urgent, true]]);
    // ...and a spot worker the ordinary one.
    const spot = await queue.claim(claimOpts({ workerId: "spot-1", pool: "spot", limit: 5 }));
    expect(spot.map((s) => [s.batchId, s.urgent])).toEqual([[ordinary, false]]);
    await h.reset();
    // No dedicated room (its worker runs a shard to its capacity): spot takes the urgent shard as a fallback.
    const urgent2 = await batch(2, { windowSeconds: 100, submittedAgo: 50 });
    await workers.register({ id: "spot-1", pool: "spot", capacity: 2, models: ["m"], running: [] });
    await workers.register({ id: "ded-1", pool: "dedicated", capacity: 1, models: ["m"], running: [] });
    expect(await queue.claim(claimOpts({ workerId: "ded-1", pool: "dedicated", limit: 1 }))).toHaveLength(1);
    const fallback = await queue.claim(claimOpts({ workerId: "spot-1", pool: "spot", limit: 5 }));
    expect(fallback.map((s) => [s.batchId, s.idx])).toEqual([[urgent2, 1]]);
    await h.reset();
    // Room is counted in shards: a spot worker running two shards of one batch at its capacity of two is full,
    // so a dedicated worker takes ordinary work.
    const wide = await batch(3);
    await workers.register({ id: "spot-1", pool: "spot", capacity: 2, models: ["m"], running: [] });
    await workers.register({ id: "ded-1", pool: "dedicated", capacity: 1, models: ["m"], running: [] });
    expect(await queue.claim(claimOpts({ workerId: "ded-1", pool: "dedicated", limit: 1 }))).toEqual([]);
    expect(await queue.claim(claimOpts({ workerId: "spot-1", pool: "spot", limit: 2 }))).toHaveLength(2);
    await workers.register({ id: "spot-1", pool: "spot", capacity: 2, models: ["m"], running: [wide] });
    const spill = await queue.claim(claimOpts({ workerId: "ded-1", pool: "dedicated", limit: 1 }));
    expect(spill.map((s) => [s.batchId, s.idx])).toEqual([[wide, 2]]);
    // A worker outside the pools (one process's upstream models) takes its shards whatever the pool rules say.
    await h.reset();
    const anyPool = await batch(1);
    await workers.register({ id: "spot-1", pool: "spot", capacity: 2, models: ["m"], running: [] });
    expect((await queue.claim(claimOpts({ workerId: "up", pool: null }))).map((s) => s.batchId)).toEqual([anyPool]);
    // A worker never claims a model it does not serve.
    await batch(1);
    expect(await queue.claim(claimOpts({ models: ["other"] }))).toEqual([]);
  });

  it.skipIf(skip)("changes a batch only from the statuses its writer names, and leaves the live counts to checkpoints", async () => {
    const { batches, queue } = ports;
    const id = await batch(1);
    const [s] = await queue.claim(claimOpts());
    await queue.commit(s, { part: { output: "p" }, completed: 7, failed: 1, usage }, 30);
    const moved = await batches.update(id, ["validating"], (r) => {
      r.batch.status = "in_progress";
      r.batch.in_progress_at = 5;
      r.batch.request_counts.completed = 0;
    });
    expect(moved?.batch.status).toBe("in_progress");
    // A second writer that read "validating" decides nothing; a change that declines writes nothing.
    const late = await batches.update(id, ["validating"], (r) => {
      r.stopReason = "cancelled";
    });
    expect(late).toBeUndefined();
    expect(await batches.update(id, ["in_progress"], () => false)).toBeUndefined();
    const row = (await batches.get(id))!;
    expect(row.stopReason).toBeNull();
    expect(row.batch).toMatchObject({ status: "in_progress", in_progress_at: 5, request_counts: { completed: 7, failed: 1, total: 10 } });
    expect(Object.keys(row.batch.request_counts)).toEqual(["completed", "failed", "total"]);
    // Past its deadline it stops once, as expired; settling counts every request without a result as failed.
    expect(await batches.expireDue(row.batch.deadline_at)).toEqual([id]);
    expect(await batches.expireDue(row.batch.deadline_at)).toEqual([]);
    expect((await batches.get(id))!.stopReason).toBe("expired");
    await batches.settleCounts(id);
    expect((await batches.get(id))!.batch.request_counts).toMatchObject({ completed: 7, failed: 3 });
    expect(await queue.claim(claimOpts({ limit: 5 }))).toEqual([]);
    expect((await queue.claimStopped("maintenance", 30, 5)).map((x) => x.stopReason)).toEqual([]);
  });

  it.skipIf(skip)(
    "claims the waiting shards of an unserved model outside the pools: not those held, done, of other models, paused or stopped batches",
    async () => {
      const { queue, batches } = ports;
      const id = await batch(3, { models: ["m", "gone", "gone"] });
      const paused = await batch(1, { models: ["gone"] });
      await batches.update(paused, ["validating"], (r) => {
        r.batch.paused_at = now();
      });
      const stopped = await batch(1, { models: ["gone"] });
      await batches.update(stopped, ["validating"], (r) => {
        r.stopReason = "cancelled";
      });
      // One of them is held by a worker that still serves it (an older release, say).
      const [held] = await queue.claim(claimOpts({ workerId: "old", models: ["gone"], limit: 1 }));
      expect([held.batchId, held.idx]).toEqual([id, 1]);
      const taken = await queue.claimUnserved("maintenance", ["gone"], 30, 10);
      expect(taken.map((s) => [s.batchId, s.idx, s.model, s.pool, s.stopReason])).toEqual([[id, 2, "gone", null, null]]);
      expect(await queue.claimUnserved("maintenance", ["gone"], 30, 10)).toEqual([]);
      // The base's shard is for the workers.
      expect((await queue.claim(claimOpts({ limit: 5 }))).map((s) => [s.batchId, s.idx])).toEqual([[id, 0]]);
    },
  );

  it.skipIf(skip)("keeps each worker's URL for synchronous requests with its row, null where it names none", async () => {
    const { workers } = ports;
    await workers.register({ id: "w-url", pool: "spot", capacity: 2, models: ["m"], running: [], url: "http://10.0.0.7:8000" });
    await workers.register({ id: "w-none", pool: "dedicated", capacity: 1, models: ["m"], running: [] });
    const live = await workers.live(30);
    expect(live.find((w) => w.id === "w-url")?.url).toBe("http://10.0.0.7:8000");
    expect(live.find((w) => w.id === "w-none")?.url).toBeNull();
    await workers.register({ id: "w-url", pool: "spot", capacity: 2, models: ["m"], running: [], url: null });
    expect((await workers.live(30)).find((w) => w.id === "w-url")?.url).toBeNull();
  });

  it.skipIf(skip)("lists batches newest first per owner, and forgets an ended batch with its input once nothing reads it", async () => {
    const { batches } = ports;
    const ids = [await batch(1), await batch(1), await batch(1)];
    const page = await batches.list({ limit: 2, owner: null });
    expect(page.data.map((b) => b.id)).toEqual([ids[2], ids[1]]);
    expect(page.has_more).toBe(true);
    expect((await batches.list({ limit: 5, owner: null, after: ids[1] })).data.map((b) => b.id)).toEqual([ids[0]]);
    await expect(batches.list({ limit: 5, owner: null, after: "batch_nope" })).rejects.toThrow(/batch_nope/);
    expect((await batches.list({ limit: 5, owner: "someone" })).data).toEqual([]);
    for (const id of ids)
      await batches.update(id, ["validating"], (r) => {
        r.batch.status = "cancelled";
        r.batch.cancelled_at = 100;
      });
    expect(await batches.endedBefore(99)).toEqual([]);
    expect(await batches.endedBefore(100)).toEqual(ids);
    // The three batches read one input: only the last removal hands it back.
    expect(await batches.remove(ids[0])).toEqual({});
    expect(await batches.remove(ids[1])).toEqual({});
    expect(await batches.remove(ids[2])).toEqual({ orphanInput: "files/x.jsonl" });
    expect(await batches.get(ids[2])).toBeUndefined();
  });

  it.skipIf(skip)(
    "searches in one query a page: status, model, endpoint, key=value metadata, a part of the id, file name or metadata",
    async () => {
      const { files, batches } = ports;
      writeFileSync(path.join(blobDir, "s.jsonl"), "{}\n");
      const file = await files.adopt({
        tmpPath: path.join(blobDir, "s.jsonl"),
        filename: "Nightly_Eval.jsonl",
        purpose: "batch",
        owner: null,
      });
      const make = async (metadata: Record<string, string> | null, fileId = "file-x") => {
        const id = `batch_${String(++n).padStart(24, "0")}`;
        const b = newBatchObject({
          id,
          endpoint: "/v1/completions",
          completion_window: "24h",
          metadata,
          inputFileId: fileId,
          created: now(),
          windowSeconds: 86_400,
          validation: { ok: true, total: 1, errors: [], errorCount: 0, model: "m" },
          registry: singleModelRegistry("/models/m.gguf", false),
        });
        await batches.insert({ batch: b, owner: null, inputKey: "files/x.jsonl", shards: [] });
        return id;
      };
      const a = await make({ project: "Labels", team: "ml" });
      const b = await make(null, file.id);
      const c = await make({ project: "labels-50%_off" });
      const ids = async (q: { text?: string; status?: string; model?: string; endpoint?: string; after?: string; limit?: number }) => {
        const page = await batches.search({ limit: 10, owner: null, ...q });
        return page.data.map((r) => r.batch.id);
      };
      expect(await ids({})).toEqual([c, b, a]);
      expect(await ids({ text: "project=labels" })).toEqual([a]);
      expect(await ids({ text: "PROJECT=LABELS team=ml" })).toEqual([a]);
      expect(await ids({ text: "project=label" })).toEqual([]);
      expect(await ids({ text: "labels" })).toEqual([c, a]);
      // LIKE's wildcards are the text's own characters.
      expect(await ids({ text: "50%_" })).toEqual([c]);
      expect(await ids({ text: "%" })).toEqual([c]);
      expect(await ids({ text: "nightly_eval" })).toEqual([b]);
      expect(await ids({ text: b.slice(-6) })).toEqual([b]);
      expect(await ids({ status: "validating", model: "m", endpoint: "/v1/completions" })).toEqual([c, b, a]);
      expect(await ids({ status: "completed" })).toEqual([]);
      expect(await ids({ endpoint: "/v1/messages" })).toEqual([]);
      const first = await batches.search({ limit: 1, owner: null, text: "labels" });
      expect([first.data.map((r) => r.batch.id), first.has_more]).toEqual([[c], true]);
      expect(first.data[0].inputFilename).toBeNull();
      expect(await ids({ text: "labels", after: c })).toEqual([a]);
      expect((await batches.search({ limit: 10, owner: null, text: "nightly" })).data[0].inputFilename).toBe("Nightly_Eval.jsonl");
      expect(await batches.search({ limit: 10, owner: "someone", text: "" })).toEqual({ data: [], has_more: false });
    },
  );

  it.skipIf(skip)("records files once per id, scoped to their owner, and keeps an input an unfinished batch still reads", async () => {
    const { files, batches } = ports;
    writeFileSync(path.join(blobDir, "up.jsonl"), "{}\n");
    const up = await files.adopt({ tmpPath: path.join(blobDir, "up.jsonl"), filename: "in.jsonl", purpose: "batch", owner: "k1" });
    expect(await files.get(up.id, "k2")).toBeUndefined();
    const key = (await files.keyOf(up.id, "k1"))!.key;
    expect(await blobs.size(key)).toBe(3);
    const out = { id: "file-out", key: "batches/b/out.jsonl", size: 1, filename: "o.jsonl", purpose: "batch_output" as const, owner: "k1" };
    const first = await files.record(out);
    expect(await files.record({ ...out, filename: "again.jsonl" })).toEqual(first);
    const listed = await files.list({ limit: 10, order: "asc", owner: "k1" });
    expect(listed.data.map((f) => f.id)).toEqual([up.id, "file-out"]);
    expect((await files.list({ limit: 10, order: "desc", owner: "k1", purpose: "batch" })).data.map((f) => f.id)).toEqual([up.id]);
    // A batch reading the upload, which names file-out as its output: deleting both keeps the input's content
    // (the batch still runs) and clears the batch's output_file_id.
    const b = newBatchObject({
      id: "batch_000000000000000000000999",
      endpoint: "/v1/completions",
      completion_window: "24h",
      inputFileId: up.id,
      created: now(),
      windowSeconds: 86_400,
      validation: { ok: true, total: 1, errors: [], errorCount: 0, model: "m" },
      registry: singleModelRegistry("/models/m.gguf", false),
    });
    b.output_file_id = "file-out";
    await batches.insert({ batch: b, owner: "k1", inputKey: key, shards: [{ byteStart: 0, byteEnd: 3, total: 1 }] });
    expect(await files.delete(up.id, "k2")).toBe(false);
    expect(await files.delete(up.id, "k1")).toBe(true);
    await files.remove("file-out");
    expect(await files.get(up.id, "k1")).toBeUndefined();
    expect(await blobs.size(key)).toBe(3);
    expect((await batches.get(b.id))!.batch.output_file_id).toBeNull();
    expect((await files.expired(first.expires_at! + 1)).map((f) => f.id)).toEqual([]);
  });
});
