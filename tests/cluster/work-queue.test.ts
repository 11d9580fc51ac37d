// The PostgreSQL work queue's guarantees, on a real database: claims never overlap, a claim fences the previous
// holder (epoch), a commit retried after its reply was lost counts once, lapsed leases go back to the queue,
// and the scheduler's pool rules (spot first, urgent to dedicated, fallback) hold across workers.
import pino from "pino";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newBatchObject } from "../../api/control/batch-object.js";
import { singleModelRegistry } from "../../backends/registry.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../bench/postgres.js";
import { startPostgres, type TestPostgres } from "../../bench/postgres.js";
import { PgBatchRecords } from "../../cluster/pg/batches.js";
import { createPool, migrate } from "../../cluster/pg/db.js";
import { PgWorkQueue } from "../../cluster/pg/shards.js";
import { PgWorkerRegistry } from "../../cluster/pg/workers.js";
import type { ClaimOptions } from "../../cluster/ports.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const usage = { promptTokens: 3, completionTokens: 2, cachedTokens: 1 };

describe.skipIf(!POSTGRES_BIN)("PgWorkQueue", () => {
  let server: TestPostgres;
  let db: pg.Pool;
  let batches: PgBatchRecords;
  let queue: PgWorkQueue;
  let workers: PgWorkerRegistry;
  let n = 0;
  const now = () => Math.floor(Date.now() / 1000);

  async function batch(shards: number, opts: { windowSeconds?: number; submittedAgo?: number; maxOpen?: number } = {}): Promise<string> {
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
    const plan = Array.from({ length: shards }, (_, i) => ({ byteStart: i * 100, byteEnd: (i + 1) * 100, total: 10 }));
    const admitted = await batches.insert({ batch: b, owner: null, inputKey: "files/x.jsonl", shards: plan, maxOpen: opts.maxOpen });
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
  async function drainAll() {
    await db.query("UPDATE shards SET state = 'done'");
    await db.query("DELETE FROM workers");
  }

  beforeAll(async () => {
    server = await startPostgres();
    db = createPool(server.url, pino({ level: "silent" }));
    await migrate(db, pino({ level: "silent" }));
    batches = new PgBatchRecords(db);
    queue = new PgWorkQueue(db);
    workers = new PgWorkerRegistry(db);
  }, 60_000);
  afterAll(async () => {
    await db?.end();
    server?.destroy();
  });

  it("admits open batches up to the bound, however many API servers create at once", async () => {
    await db.query("DELETE FROM batches");
    const ids = await Promise.all(Array.from({ length: 10 }, () => batch(1, { maxOpen: 3 })));
    expect(ids.filter(Boolean).length).toBe(3);
    expect(await batches.openCount()).toBe(3);
    await db.query("DELETE FROM batches");
  });

  it("hands each shard to one claimer, however many claim at once", async () => {
    const id = await batch(40);
    const claimed = await Promise.all(Array.from({ length: 12 }, (_, i) => queue.claim(claimOpts({ workerId: `c${i}`, limit: 5 }))));
    const keys = claimed.flat().map((s) => `${s.batchId}/${s.idx}`);
    expect(keys.length).toBe(40);
    expect(new Set(keys).size).toBe(40);
    expect(claimed.flat().every((s) => s.batchId === id && s.epoch === 1)).toBe(true);
    await drainAll();
  });

  it("counts a commit once when it is retried after its reply was lost, and fences a worker whose shard was taken over", async () => {
    const id = await batch(1);
    const [s] = await queue.claim(claimOpts({ workerId: "a" }));
    const commit = { part: { output: "p1" }, completed: 4, failed: 1, usage };
    expect(await queue.commit({ ...s }, commit, 30)).toBe("committed");
    // The same commit again (the worker never saw the first reply): recognised, not applied twice.
    expect(await queue.commit({ ...s }, commit, 30)).toBe("committed");
    let row = (await batches.get(id))!;
    expect(row.batch.request_counts).toMatchObject({ completed: 4, failed: 1 });
    expect(row.batch.usage).toMatchObject({ input_tokens: 3, output_tokens: 2, input_tokens_details: { cached_tokens: 1 } });
    // The lease lapses and another worker takes the shard: the first can commit and finish nothing more.
    await db.query("UPDATE shards SET lease_until = now() - interval '1 second'");
    const [taken] = await queue.claim(claimOpts({ workerId: "b" }));
    expect(taken.epoch).toBe(2);
    expect(taken.parts).toEqual([{ output: "p1" }]);
    const stale = { ...s, checkpoints: 1 };
    expect(await queue.commit(stale, { ...commit, part: { output: "p2" } }, 30)).toBe("fenced");
    expect(await queue.finish(stale)).toBe("fenced");
    const beat = await queue.heartbeat("a", [s], 30);
    expect([...beat.lost]).toEqual([`${id}/0`]);
    row = (await batches.get(id))!;
    expect(row.batch.request_counts).toMatchObject({ completed: 4, failed: 1 });
    expect(await queue.finish(taken)).toBe("committed");
    expect(await batches.readyToFinish()).toContain(id);
    await drainAll();
  });

  it("puts lapsed leases back in the queue with a new epoch; a hand-back is claimable at once", async () => {
    await batch(2);
    const claimed = await queue.claim(claimOpts({ workerId: "dead", limit: 2 }));
    await db.query("UPDATE shards SET lease_until = now() - interval '1 second' WHERE idx = 0 AND worker_id = 'dead'");
    expect(await queue.reap()).toBe(1);
    await queue.handBack(claimed[1]);
    const again = await queue.claim(claimOpts({ workerId: "alive", limit: 5 }));
    expect(again.map((s) => [s.idx, s.epoch]).sort()).toEqual([
      [0, 3],
      [1, 2],
    ]);
    await drainAll();
  });

  it("sends ordinary shards to spot and urgent ones to dedicated, each falling back when the other has no room", async () => {
    const ordinary = await batch(1);
    const urgent = await batch(1, { windowSeconds: 100, submittedAgo: 50 });
    await workers.register({ id: "spot-1", pool: "spot", capacity: 1, models: ["m"], running: [] });
    await workers.register({ id: "ded-1", pool: "dedicated", capacity: 1, models: ["m"], running: [] });
    // With room on spot, a dedicated worker takes only the urgent shard...
    const ded = await queue.claim(claimOpts({ workerId: "ded-1", pool: "dedicated", limit: 5 }));
    expect(ded.map((s) => s.batchId)).toEqual([urgent]);
    // ...and a spot worker the ordinary one.
    const spot = await queue.claim(claimOpts({ workerId: "spot-1", pool: "spot", limit: 5 }));
    expect(spot.map((s) => s.batchId)).toEqual([ordinary]);
    await drainAll();
    // No dedicated room (its worker is full): spot takes the urgent shard as a fallback.
    const urgent2 = await batch(1, { windowSeconds: 100, submittedAgo: 50 });
    await workers.register({ id: "ded-1", pool: "dedicated", capacity: 1, models: ["m"], running: ["busy"] });
    const fallback = await queue.claim(claimOpts({ workerId: "spot-1", pool: "spot", limit: 5 }));
    expect(fallback.map((s) => s.batchId)).toEqual([urgent2]);
    // A worker never claims a model it does not serve.
    await batch(1);
    expect(await queue.claim(claimOpts({ models: ["other"] }))).toEqual([]);
    await drainAll();
  });
});
