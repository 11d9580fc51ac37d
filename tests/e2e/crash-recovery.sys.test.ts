// kill -9 of the real server process mid-batch: after the restart on the same BATCH_DIR the finished
// batch is as it was, the running one resumes where it stopped, the queued ones run in their order,
// and every custom_id ends up exactly once across the output and error files. (A second stop at
// another moment, an immediate exit mid-drain, is in shutdown.sys.test.ts.)
import { describe, expect, it } from "vitest";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import {
  accountIds,
  createBatch,
  getBatch,
  isFinal,
  logLines,
  pollBatch,
  resultLines,
  tmpFiles,
  uploadJsonl,
} from "../helpers/http-batches.js";
import type { ServerProcess } from "../helpers/process.js";
import { serverTestbed } from "../helpers/server-testbed.js";

// One slot in all: one batch runs, the others wait in the queue.
const bed = serverTestbed("crash", { SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
const { dir } = bed;
const start = () => bed.start();

async function kill9(s: ServerProcess) {
  s.child.kill("SIGKILL");
  await s.exited;
}

const BIG = 96;

describe("crash recovery of the server process", () => {
  it("loses and repeats nothing across a kill -9 mid-batch", async () => {
    let s = await start();
    // Without API_KEYS the service says at start-up that it has no keys, and listens on loopback only.
    expect(
      logLines(s.output()).some((l) => /API_KEYS is not set: the API has no keys, so it listens on 127\.0\.0\.1 only/.test(l.msg)),
    ).toBe(true);
    const small = await uploadJsonl(s.baseUrl, completionJsonl(4, { prefix: "done" }));
    const done = await pollBatch(s.baseUrl, (await createBatch(s.baseUrl, small.id)).body.id, isFinal);
    expect(done.status).toBe("completed");
    const doneOutput = await (await fetch(`${s.baseUrl}/v1/files/${done.output_file_id}/content`)).text();

    // Long requests at a high temperature, so the batch is still running when it is killed.
    const big = await uploadJsonl(s.baseUrl, completionJsonl(BIG, { prefix: "big", maxTokens: 100, temperature: 1 }));
    const running = (await createBatch(s.baseUrl, big.id)).body;
    const queued = [(await createBatch(s.baseUrl, small.id)).body, (await createBatch(s.baseUrl, small.id)).body];
    const first = await pollBatch(s.baseUrl, running.id, (b) => b.request_counts.completed >= 8);
    expect(first.status).toBe("in_progress");
    await kill9(s);

    const onDisk = resultLines(dir, running.id).output.length;
    expect(onDisk).toBeGreaterThanOrEqual(8);
    expect(onDisk).toBeLessThan(BIG);

    s = await start();
    // Straight after the restart: the finished batch is unchanged and the queued ones wait again.
    expect(await getBatch(s.baseUrl, done.id)).toEqual(done);
    for (const q of queued) expect((await getBatch(s.baseUrl, q.id)).status).toBe("validating");
    const final = [running, ...queued].map((b) => pollBatch(s.baseUrl, b.id, isFinal));
    const [r, q1, q2] = await Promise.all(final);
    for (const b of [r, q1, q2]) {
      expect(b.status).toBe("completed");
      expect(b.request_counts.completed + b.request_counts.failed).toBe(b.request_counts.total);
    }
    expect(r.request_counts).toEqual({ completed: BIG, failed: 0, total: BIG });
    // Exactly once: the result files are append-only, so a request run twice would show up twice.
    expect(accountIds(dir, running.id, customIds("big", BIG))).toEqual({ duplicated: [], missing: [], lines: BIG });
    for (const q of [q1, q2]) expect(accountIds(dir, q.id, customIds("done", 4))).toEqual({ duplicated: [], missing: [], lines: 4 });

    // The resumed batch went first, then the queued ones in the order they were submitted.
    const started = logLines(s.output())
      .filter((l) => l.msg === "batch started")
      .map((l) => l.batch_id);
    expect(started).toEqual([running.id, queued[0].id, queued[1].id]);
    expect(logLines(s.output()).find((l) => l.msg === "batch started")).toMatchObject({ resumed: true });

    expect(await getBatch(s.baseUrl, done.id)).toEqual(done);
    expect(await (await fetch(`${s.baseUrl}/v1/files/${done.output_file_id}/content`)).text()).toBe(doneOutput);

    s.child.kill("SIGTERM");
    expect(await s.exited).toBe(0);
    // Checked once the process is gone: while it runs, a throttled progress save may be mid-rename.
    expect(tmpFiles(dir)).toEqual([]);
  });
});
