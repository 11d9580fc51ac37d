// The worker with a stand-in job body: these tests are about slots and ordering, not inference
// (the real engine runs in control-plane.test.ts).
import pino from "pino";
import { describe, expect, it } from "vitest";
import { JobQueue, type QueuedJob } from "../../api/control/job-queue.js";
import { PoolScheduler, type Lease } from "../../api/control/pool-scheduler.js";
import { Worker } from "../../api/control/worker.js";
import type { AbortReason } from "../../pipeline/types.js";

const NOW = 1_000_000;
const silent = pino({ level: "silent" });

interface Started {
  job: QueuedJob;
  lease: Lease;
  signal: AbortSignal;
  drain: AbortSignal;
  finish: () => void;
  fail: (err: Error) => void;
}

function setup(spot = 2, dedicated = 1) {
  const queue = new JobQueue({ maxDepth: 100, urgentSeconds: 600, retryAfterSeconds: 30 });
  const scheduler = new PoolScheduler({ spot: { capacity: spot }, dedicated: { capacity: dedicated } }, silent);
  const started: Started[] = [];
  const worker = new Worker({
    queue,
    scheduler,
    logger: silent,
    urgentSeconds: 600,
    now: () => NOW,
    runJob: (job, lease, signal, drain) =>
      new Promise<void>((resolve, reject) => {
        const s: Started = { job, lease, signal, drain, finish: resolve, fail: reject };
        // A job body that honours its signal, as the pipeline does.
        signal.addEventListener("abort", () => resolve(), { once: true });
        started.push(s);
      }),
  });
  let seq = 0;
  const add = (id: string, secondsLeft = 86_400) => {
    queue.enqueue({ batchId: id, seq: ++seq, submittedAt: NOW, deadlineAt: NOW + secondsLeft });
    worker.wake();
  };
  return { queue, scheduler, worker, started, add };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("worker", () => {
  it("runs at most the pools' total capacity at once and waits when both pools are full", async () => {
    const { scheduler, worker, started, add, queue } = setup(2, 1);
    worker.start();
    for (const id of ["a", "b", "c", "d", "e"]) add(id);
    await tick();
    expect(started.map((s) => [s.job.batchId, s.lease.pool])).toEqual([
      ["a", "spot"],
      ["b", "spot"],
      ["c", "dedicated"],
    ]);
    expect(worker.stats()).toEqual({ depth: 2, max_depth: 100, running: 3 });
    expect(queue.toArray().map((j) => j.batchId)).toEqual(["d", "e"]);

    started[1].finish();
    await tick();
    expect(started.map((s) => s.job.batchId)).toEqual(["a", "b", "c", "d"]);
    expect(started[3].lease.pool).toBe("spot");
    expect(scheduler.inUse).toBe(3);
  });

  it("releases the slot of a job that throws and carries on", async () => {
    const { scheduler, worker, started, add } = setup(1, 0);
    worker.start();
    add("bad");
    add("good");
    await tick();
    expect(started).toHaveLength(1);
    started[0].fail(new Error("boom"));
    await tick();
    await tick();
    expect(started.map((s) => s.job.batchId)).toEqual(["bad", "good"]);
    started[1].finish();
    await worker.idle();
    expect(scheduler.inUse).toBe(0);
    expect(scheduler.status()[0].jobs).toEqual([]);
  });

  it("starts an urgent job first and gives it the dedicated pool", async () => {
    const { worker, started, add } = setup(1, 1);
    add("relaxed");
    add("urgent", 60);
    worker.start();
    await tick();
    expect(started.map((s) => [s.job.batchId, s.lease.pool])).toEqual([
      ["urgent", "dedicated"],
      ["relaxed", "spot"],
    ]);
  });

  it("aborts one job with the reason it is given", async () => {
    const { worker, started, add, scheduler } = setup(2, 0);
    worker.start();
    add("a");
    add("b");
    await tick();
    const reason: AbortReason = { code: "batch_cancelled", message: "x" };
    expect(worker.abort("a", reason)).toBe(true);
    expect(worker.abort("nope", reason)).toBe(false);
    expect(started[0].signal.reason).toBe(reason);
    expect(started[1].signal.aborted).toBe(false);
    await tick();
    expect(worker.isRunning("a")).toBe(false);
    expect(scheduler.inUse).toBe(1);
  });

  it("on close drains first: a job that finishes within the grace period is never aborted", async () => {
    const { worker, started, add, scheduler } = setup(1, 0);
    worker.start();
    add("a");
    await tick();
    // The job's requests in flight finish a little after the drain is asked for.
    started[0].drain.addEventListener("abort", () => setTimeout(started[0].finish, 20), { once: true });
    await worker.close({ graceMs: 5_000 });
    expect(started[0].drain.reason).toMatchObject({ code: "shutdown" });
    expect(started[0].signal.aborted).toBe(false);
    expect(scheduler.inUse).toBe(0);
  });

  it("on close aborts with 'shutdown' what outlives the grace period, stops dequeuing and releases every slot", async () => {
    const { worker, started, add, scheduler, queue } = setup(1, 0);
    worker.start();
    add("a");
    add("b");
    await tick();
    await worker.close({ graceMs: 50 });
    expect(started[0].drain.aborted).toBe(true);
    expect(started[0].signal.reason).toMatchObject({ code: "shutdown" });
    expect(started).toHaveLength(1);
    expect(queue.depth).toBe(1);
    expect(scheduler.inUse).toBe(0);
    add("c");
    await tick();
    expect(started).toHaveLength(1);
  });

  it("close releases slots after the grace period even if a job ignores its signal", async () => {
    const queue = new JobQueue({ maxDepth: 10, urgentSeconds: 0, retryAfterSeconds: 1 });
    const scheduler = new PoolScheduler({ spot: { capacity: 1 }, dedicated: { capacity: 0 } }, silent);
    let finish!: () => void;
    const worker = new Worker({ queue, scheduler, logger: silent, urgentSeconds: 0, runJob: () => new Promise<void>((r) => (finish = r)) });
    worker.start();
    queue.enqueue({ batchId: "stuck", seq: 1, submittedAt: NOW, deadlineAt: NOW + 100 });
    worker.wake();
    await tick();
    await worker.close({ graceMs: 0 });
    expect(scheduler.inUse).toBe(0);
    finish();
    await worker.idle();
  });
});
