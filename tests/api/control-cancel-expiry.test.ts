// Cancel and expiry accounting with the real engine: every request ends with exactly one line, in
// the output or the error file, so completed + failed == total.
import { readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createControlPlane, type ControlPlane } from "../../api/control/index.js";
import type { Batch } from "../../api/schemas/objects.js";
import type { Engine } from "../../engine/types.js";
import { completionLines, inStatus, logger, openTestEngine, readJsonl, tempBatchDir, testConfig, upload, waitFor } from "./control-fixtures.js";

let engine: Engine;
let dir: string;
let cp: ControlPlane;

beforeAll(async () => {
  engine = await openTestEngine();
});
afterAll(() => engine?.close());
afterEach(async () => {
  await cp?.close();
  await rm(dir, { recursive: true, force: true });
});

/** One slot in all, so a second batch waits in the queue behind the first. */
async function startOneSlot() {
  dir = tempBatchDir();
  cp = await createControlPlane({ config: testConfig(dir, { SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" }), engine, logger });
}

/** Checks that output + errors hold every custom_id of the input exactly once and match the counts. */
function expectAccounted(b: Batch, errorCode: string) {
  const bdir = path.join(dir, b.id);
  const input = readJsonl(path.join(bdir, "input.jsonl")).map((l) => l.custom_id);
  const out = readJsonl(path.join(bdir, "output.jsonl"));
  const errs = readJsonl(path.join(bdir, "errors.jsonl"));
  expect([...out, ...errs].map((l) => l.custom_id).sort()).toEqual([...input].sort());
  expect(b.request_counts).toEqual({ completed: out.length, failed: errs.length, total: input.length });
  expect(b.request_counts.completed + b.request_counts.failed).toBe(b.request_counts.total);
  for (const e of errs) expect(e).toMatchObject({ response: null, error: { code: errorCode } });
  expect(b.error_file_id).not.toBeNull();
  expect(cp.files.get(b.error_file_id!, null)!.path).toBe(path.join(bdir, "errors.jsonl"));
  if (out.length > 0) expect(cp.files.get(b.output_file_id!, null)!.path).toBe(path.join(bdir, "output.jsonl"));
  return { out, errs };
}

describe("cancel", () => {
  it("cancels a queued batch at once and a running one after it stops", async () => {
    await startOneSlot();
    const long = await upload(cp, dir, completionLines(60, { maxTokens: 64 }));
    const short = await upload(cp, dir, completionLines(5));
    const running = await cp.batches.create({ input_file_id: long.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    const queued = await cp.batches.create({ input_file_id: short.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    await waitFor(cp, running.id, (b) => b.request_counts.completed >= 2);

    const q = await cp.batches.cancel(queued.id, null);
    expect(q.status).toBe("cancelled");
    expect(q.cancelled_at).not.toBeNull();
    expect(q.in_progress_at).toBeNull();
    expect(q.request_counts).toEqual({ completed: 0, failed: 5, total: 5 });
    expectAccounted(q, "batch_cancelled");
    expect(q.output_file_id).toBeNull();

    const r = await cp.batches.cancel(running.id, null);
    expect(r.status).toBe("cancelling");
    expect(r.cancelling_at).not.toBeNull();
    const done = await waitFor(cp, running.id, inStatus("cancelled"));
    const { out } = expectAccounted(done, "batch_cancelled");
    expect(out.length).toBeGreaterThanOrEqual(2);
    expect(out.length).toBeLessThan(60);
    expect(done.deadline_met).toBeNull();

    // Cancelling a finished batch is not an error: it comes back as it is.
    expect(await cp.batches.cancel(running.id, null)).toEqual(done);
    expect(cp.status.poolStatus()[0].in_use).toBe(0);
    await cp.close(); // flushes state writes
    const onDisk = JSON.parse(readFileSync(path.join(dir, running.id, "batch.json"), "utf8"));
    expect(onDisk.batch).toEqual(done);
  });
});

describe("expiry", () => {
  it("expires a running batch with partial results and a queued one with none", async () => {
    await startOneSlot();
    // Far more work than fits in three seconds on this model; the queued batch's window closes first.
    const long = await upload(cp, dir, completionLines(120, { maxTokens: 96 }));
    const short = await upload(cp, dir, completionLines(4));
    const running = await cp.batches.create({ input_file_id: long.id, endpoint: "/v1/completions", completion_window: "3s", owner: null });
    await waitFor(cp, running.id, inStatus("in_progress"));
    const queued = await cp.batches.create({ input_file_id: short.id, endpoint: "/v1/completions", completion_window: "1s", owner: null });

    const q = await waitFor(cp, queued.id, inStatus("expired", "completed"));
    expect(q.status).toBe("expired");
    expect(q.in_progress_at).toBeNull();
    expect(q.request_counts).toEqual({ completed: 0, failed: 4, total: 4 });
    expectAccounted(q, "batch_expired");

    const r = await waitFor(cp, running.id, inStatus("expired", "completed"));
    expect(r.status).toBe("expired");
    expect(r.deadline_met).toBe(false);
    expect(r.expired_at).toBeGreaterThanOrEqual(r.deadline_at);
    const { out } = expectAccounted(r, "batch_expired");
    expect(out.length).toBeGreaterThan(0);
    expect(out.length).toBeLessThan(120);
    expect(r.usage.output_tokens).toBeGreaterThan(0);
  });
});
