// A paused batch across kill -9 of the real server process: after the restart on the same BATCH_DIR it is still
// paused (its pause was durable before the 200), claims nothing, and once resumed finishes with every custom_id
// exactly once across the output and error files.
import { describe, expect, it } from "vitest";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { accountIds, createBatch, getBatch, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { serverTestbed } from "../helpers/server-testbed.js";

const bed = serverTestbed("pause-crash");
const LINES = 200;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("pause across a crash", () => {
  it("stays paused through kill -9, and resumes to every custom_id once", async () => {
    let s = await bed.start({ SEQUENCES: "2" });
    const file = await uploadJsonl(s.baseUrl, completionJsonl(LINES, { prefix: "pk", maxTokens: 48 }));
    const { body } = await createBatch(s.baseUrl, file.id);
    await pollBatch(s.baseUrl, body.id, (b) => b.request_counts.completed >= 10);
    const paused = await (await fetch(`${s.baseUrl}/v1/batches/${body.id}/pause`, { method: "POST" })).json();
    expect(paused.paused_at).toBeGreaterThan(0);
    s.child.kill("SIGKILL");
    await s.exited;

    s = await bed.start({ SEQUENCES: "2" });
    const after = await getBatch(s.baseUrl, body.id);
    expect(after).toMatchObject({ status: "in_progress", paused_at: paused.paused_at });
    await sleep(3_000);
    expect((await getBatch(s.baseUrl, body.id)).request_counts).toEqual(after.request_counts);
    expect(after.request_counts.completed).toBeLessThan(LINES);

    await fetch(`${s.baseUrl}/v1/batches/${body.id}/resume`, { method: "POST" });
    const done = await pollBatch(s.baseUrl, body.id, (b) => b.status === "completed", 180_000);
    expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
    const account = accountIds(bed.dir, body.id, customIds("pk", LINES));
    expect(account).toMatchObject({ duplicated: [], missing: [], lines: LINES });
    s.child.kill("SIGKILL");
  }, 300_000);
});
