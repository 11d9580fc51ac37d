// SIGTERM on the real server process mid-batch: it drains and exits 0 with its state whole, and the
// restart resumes. A second signal during the drain exits at once, and still nothing is lost or repeated.
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { SIGNAL_REPEAT_MS } from "../../app/signals.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { accountIds, createBatch, isFinal, logLines, pollBatch, resultLines, tmpFiles, uploadJsonl } from "../helpers/http-batches.js";
import type { ServerProcess } from "../helpers/process.js";
import { serverTestbed } from "../helpers/server-testbed.js";

const bed = serverTestbed("shutdown", {
  SPOT_CAPACITY: "1",
  DEDICATED_CAPACITY: "0",
  // Far more requests in flight than sequences, so a drain has real work to let finish and lasts long
  // enough for a second signal to land during it, past the window in which repeats count as one (app/signals.ts).
  PIPELINE_CONCURRENCY: "24",
  SEQUENCES: "2",
  SHUTDOWN_GRACE_SECONDS: "30",
});
const { dir } = bed;
const start = () => bed.start();

async function waitForLog(s: ServerProcess, msg: string | RegExp, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  const hit = (l: any) => (typeof msg === "string" ? l.msg === msg : msg.test(l.msg));
  while (!logLines(s.output()).some(hit)) {
    if (Date.now() > deadline) throw new Error(`no log line ${msg} in:\n${s.output()}`);
    if (s.child.exitCode !== null) throw new Error(`exited before logging ${msg}:\n${s.output()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const stateOf = (id: string) => JSON.parse(readFileSync(path.join(dir, id, "batch.json"), "utf8")).batch;
const TOTAL = 40;

describe("signals", () => {
  it("SIGTERM drains and exits 0; a second signal exits at once; restarts lose and repeat nothing", async () => {
    let s = await start();
    const big = await uploadJsonl(s.baseUrl, completionJsonl(TOTAL, { prefix: "long", maxTokens: 200, temperature: 1 }));
    const small = await uploadJsonl(s.baseUrl, completionJsonl(3, { prefix: "after" }));
    const running = (await createBatch(s.baseUrl, big.id)).body;
    const queued = (await createBatch(s.baseUrl, small.id)).body;
    await pollBatch(s.baseUrl, running.id, (b) => b.request_counts.completed >= 2);

    s.child.kill("SIGTERM");
    expect(await s.exited).toBe(0);
    const msgs = logLines(s.output()).map((l) => l.msg);
    expect(msgs.some((m) => /^shutting down/.test(m))).toBe(true);
    expect(msgs).toContain("batch checkpointed: it resumes where it stopped");
    expect(msgs).toContain("shutdown complete");
    // The requests in flight finished inside the grace period: nothing had to be cut short.
    expect(msgs).not.toContain("grace period over: checkpointing the requests still running");
    // The state on disk is whole and agrees with the result files.
    const { output, errors } = resultLines(dir, running.id);
    expect(readFileSync(path.join(dir, running.id, "output.jsonl"), "utf8").endsWith("\n")).toBe(true);
    expect(errors).toEqual([]);
    expect(stateOf(running.id)).toMatchObject({
      status: "in_progress",
      request_counts: { completed: output.length, failed: 0, total: TOTAL },
    });
    expect(output.length).toBeLessThan(TOTAL);
    expect(stateOf(queued.id).status).toBe("validating");
    expect(tmpFiles(dir)).toEqual([]);

    // Resumed, then SIGTERM twice: the second one does not wait for the stop. The first opens a 3 s drain (the
    // process keeps serving), so the second lands while it is certainly still up, however fast the engine.
    s = await bed.start({ SHUTDOWN_DRAIN_SECONDS: "3" });
    await waitForLog(s, "batch started");
    await pollBatch(s.baseUrl, running.id, (b) => b.request_counts.completed > output.length);
    s.child.kill("SIGTERM");
    await waitForLog(s, /^draining/);
    // A copy arriving at once (a signal to the whole process group, forwarded by npm) is the same stop;
    // one sent later is the user asking again.
    s.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, SIGNAL_REPEAT_MS + 200));
    expect(s.child.exitCode).toBeNull();
    s.child.kill("SIGTERM");
    expect(await s.exited).toBe(128 + os.constants.signals.SIGTERM);
    expect(logLines(s.output()).map((l) => l.msg)).toContain("second signal: exiting now");

    s = await start();
    const [r, q] = await Promise.all([running, queued].map((b) => pollBatch(s.baseUrl, b.id, isFinal)));
    expect(r).toMatchObject({ status: "completed", request_counts: { completed: TOTAL, failed: 0, total: TOTAL } });
    expect(q).toMatchObject({ status: "completed", request_counts: { completed: 3, failed: 0, total: 3 } });
    expect(accountIds(dir, running.id, customIds("long", TOTAL))).toEqual({ duplicated: [], missing: [], lines: TOTAL });
    expect(accountIds(dir, queued.id, customIds("after", 3))).toEqual({ duplicated: [], missing: [], lines: 3 });
    s.child.kill("SIGINT");
    expect(await s.exited).toBe(0);
  });
});
