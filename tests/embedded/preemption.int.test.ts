// A simulated spot preemption in the embedded mode: the batch running on spot checkpoints (the requests in
// flight finish and are kept), goes back to the queue first, resumes on dedicated capacity while spot is gone,
// and completes with every request run exactly once. The real engine, counted by a wrapper.
import path from "node:path";
import { describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { controlTestbed, inStatus, readJsonl, untilBatch, upload } from "../helpers/embedded-plane.js";
import { type Observed, observe } from "../helpers/test-engine.js";

const bed = controlTestbed();
const LINES = 400;

describe("spot preemption", () => {
  it("moves the spot batch to dedicated capacity from its checkpoint, nothing lost or run twice", async () => {
    let observed: Observed | undefined;
    const cp = await bed.open(
      { SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "1", SHUTDOWN_GRACE_SECONDS: "30", SPOT_PREEMPT_COOLDOWN_SECONDS: "600" },
      (e) => (observed = observe(e)),
    );
    // Far more lines than run before the reclaim, so the batch is mid-run however fast the model.
    const file = await upload(cp, bed.dir, completionJsonl(LINES, { maxTokens: 32 }));
    const batch = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    const running = await untilBatch(cp, batch.id, (b) => b.request_counts.completed >= 4);
    expect(running.pool).toBe("spot");

    const { preempted, cooldown_seconds } = await cp.status.preemptSpot();
    expect(preempted).toEqual([batch.id]);
    expect(cooldown_seconds).toBe(600);
    expect((await cp.status.poolStatus()).find((p) => p.name === "spot")).toMatchObject({ preempted: 1, available: 0 });

    const moved = await untilBatch(cp, batch.id, (b) => b.pool === "dedicated");
    expect(moved.status).toBe("in_progress");
    const done = await untilBatch(cp, batch.id, inStatus("completed"), { timeoutMs: 120_000 });
    expect(done.request_counts).toEqual({ completed: LINES, failed: 0, total: LINES });
    const ids = readJsonl(path.join(bed.dir, batch.id, "output.jsonl")).map((l) => l.custom_id);
    expect(new Set(ids).size).toBe(LINES);
    // No request ran on the engine twice: what finished before the preemption was not run again, and what waited
    // for a sequence at the preemption went back unrun.
    expect(observed!.begun).toHaveLength(LINES);
    expect(new Set(observed!.begun).size).toBe(LINES);
    // While the spot capacity is gone, a new batch goes to dedicated too.
    const next = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    expect((await untilBatch(cp, next.id, (b) => b.pool !== null)).pool).toBe("dedicated");
  });

  it("a cancel that arrives while the preempted batch checkpoints still cancels it", async () => {
    const cp = await bed.open({
      SPOT_CAPACITY: "1",
      DEDICATED_CAPACITY: "0",
      SHUTDOWN_GRACE_SECONDS: "30",
      SPOT_PREEMPT_COOLDOWN_SECONDS: "600",
    });
    // Far more lines than run before the reclaim, so the batch is mid-run however fast the model.
    const file = await upload(cp, bed.dir, completionJsonl(400, { maxTokens: 32 }));
    const batch = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    await untilBatch(cp, batch.id, (b) => b.request_counts.completed >= 2);
    expect((await cp.status.preemptSpot()).preempted).toEqual([batch.id]);
    const cancelled = await cp.batches.cancel(batch.id, null);
    expect(["cancelling", "cancelled"]).toContain(cancelled.status);
    const done = await untilBatch(cp, batch.id, inStatus("cancelled"));
    expect(done.request_counts.completed + done.request_counts.failed).toBe(400);
  });

  it("with SPOT_PREEMPTIONS_PER_HOUR, reclaims come at random and every batch still completes exactly once", async () => {
    let observed: Observed | undefined;
    // About ten reclaims a second, capacity back after one: the batches hop between spot and dedicated.
    const cp = await bed.open(
      {
        SPOT_CAPACITY: "1",
        DEDICATED_CAPACITY: "1",
        SHUTDOWN_GRACE_SECONDS: "0",
        SPOT_PREEMPT_COOLDOWN_SECONDS: "1",
        SPOT_PREEMPTIONS_PER_HOUR: "36000",
      },
      (e) => (observed = observe(e)),
    );
    const file = await upload(cp, bed.dir, completionJsonl(60, { maxTokens: 48 }));
    const ids = [];
    for (let i = 0; i < 3; i++)
      ids.push(
        (await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null })).id,
      );
    for (const id of ids) {
      const done = await untilBatch(cp, id, inStatus("completed"), { timeoutMs: 120_000 });
      expect(done.request_counts).toEqual({ completed: 60, failed: 0, total: 60 });
      const out = readJsonl(path.join(bed.dir, id, "output.jsonl")).map((l) => l.custom_id);
      expect(new Set(out).size).toBe(60);
      expect(out).toHaveLength(60);
    }
    expect((await cp.status.poolStatus()).find((p) => p.name === "spot")!.preemptions).toBeGreaterThan(0);
    // Each batch's 60 prompts reached the engine once per batch: aborted requests were never counted done, and
    // checkpointed ones were never run again. (The same 60 prompts, three batches.)
    expect(observed!.calls.length).toBeGreaterThanOrEqual(180);
  });
});
