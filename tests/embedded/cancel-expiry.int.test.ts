// Cancel, expiry and failure accounting with the real engine: every request ends with exactly one
// line, in the output or the error file, so completed + failed == total.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { ControlPlane } from "../../app/control-plane.js";
import type { Batch } from "../../domain/objects.js";
import type { Engine } from "../../engine/types.js";
import { completionJsonl } from "../../testkit/workload.js";
import { controlTestbed, inStatus, pathOf, readJsonl, untilBatch, upload } from "../helpers/embedded-plane.js";
import { type Observed, observe } from "../helpers/test-engine.js";

const bed = controlTestbed();
let dir: string;
let cp: ControlPlane;

/** The engine, with requests whose prompt is over 1,000 characters held until `gate` opens. */
function holdLongPrompts(engine: Engine, gate: Promise<void>): Engine {
  return new Proxy(engine, {
    get(target, key) {
      if (key === "complete")
        return async (...args: Parameters<Engine["complete"]>) => {
          if (typeof args[0] === "string" && args[0].length > 1000) await gate;
          return target.complete(...args);
        };
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** One slot in all, so a second batch waits in the queue behind the first. */
async function startOneSlot() {
  cp = await bed.open({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
  dir = bed.dir;
}

/** Checks that output + errors hold every custom_id of the input exactly once and match the counts. */
async function expectAccounted(b: Batch, errorCode: string) {
  const bdir = path.join(dir, b.id);
  const input = readJsonl(path.join(bdir, "input.jsonl")).map((l) => l.custom_id);
  const out = readJsonl(path.join(bdir, "output.jsonl"));
  const errs = readJsonl(path.join(bdir, "errors.jsonl"));
  expect([...out, ...errs].map((l) => l.custom_id).sort()).toEqual([...input].sort());
  expect(b.request_counts).toEqual({ completed: out.length, failed: errs.length, total: input.length });
  expect(b.request_counts.completed + b.request_counts.failed).toBe(b.request_counts.total);
  for (const e of errs) expect(e).toMatchObject({ response: null, error: { code: errorCode } });
  expect(b.error_file_id).not.toBeNull();
  expect(await pathOf(cp, dir, b.error_file_id!, null)).toBe(path.join(bdir, "errors.jsonl"));
  if (out.length > 0) expect(await pathOf(cp, dir, b.output_file_id!, null)).toBe(path.join(bdir, "output.jsonl"));
  return { out, errs };
}

describe("cancel", () => {
  it("cancels a queued batch within a moment (nothing runs) and a running one after it stops", async () => {
    await startOneSlot();
    const long = await upload(cp, dir, completionJsonl(60, { maxTokens: 64 }));
    const short = await upload(cp, dir, completionJsonl(5));
    const running = await cp.batches.create({ input_file_id: long.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    const queued = await cp.batches.create({ input_file_id: short.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    await untilBatch(cp, running.id, (b) => b.request_counts.completed >= 2);

    // As OpenAI answers a cancel: cancelling, then cancelled once the batch has stopped (for a queued one, at once).
    expect((await cp.batches.cancel(queued.id, null)).status).toBe("cancelling");
    const q = await untilBatch(cp, queued.id, inStatus("cancelled"), { timeoutMs: 3_000 });
    expect(q.cancelled_at).not.toBeNull();
    expect(q.in_progress_at).toBeNull();
    expect(q.request_counts).toEqual({ completed: 0, failed: 5, total: 5 });
    await expectAccounted(q, "batch_cancelled");
    expect(q.output_file_id).toBeNull();

    const r = await cp.batches.cancel(running.id, null);
    expect(r.status).toBe("cancelling");
    expect(r.cancelling_at).not.toBeNull();
    const done = await untilBatch(cp, running.id, inStatus("cancelled"));
    const { out } = await expectAccounted(done, "batch_cancelled");
    expect(out.length).toBeGreaterThanOrEqual(2);
    expect(out.length).toBeLessThan(60);
    expect(done.deadline_met).toBeNull();

    // Cancelling a finished batch is not an error: it comes back as it is.
    expect(await cp.batches.cancel(running.id, null)).toEqual(done);
    expect((await cp.status.poolStatus())[0].in_use).toBe(0);
    await cp.close(); // flushes state writes
    const onDisk = JSON.parse(readFileSync(path.join(dir, running.id, "batch.json"), "utf8"));
    // The record is the batch as read, less what is computed as it is read (its cost, its projected finish).
    const { cost: _c, projected_finish_at: _p, deadline_at_risk: _r, ...stored } = done;
    expect(onDisk.batch).toEqual(stored);
  });

  it("lets the requests already running finish and keep their results; only unstarted ones are cancelled", async () => {
    let observed: Observed | undefined;
    cp = await bed.open({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0", CANCEL_GRACE_SECONDS: "600" }, (e) => (observed = observe(e)));
    dir = bed.dir;
    const file = await upload(cp, dir, completionJsonl(60, { maxTokens: 48 }));
    const batch = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    await untilBatch(cp, batch.id, (b) => b.request_counts.completed >= 2);
    await cp.batches.cancel(batch.id, null);
    const done = await untilBatch(cp, batch.id, inStatus("cancelled"));
    const { out, errs } = await expectAccounted(done, "batch_cancelled");
    expect(errs.length).toBeGreaterThan(0);
    // Every request that began on the engine finished and is in the output: nothing running was thrown away; those
    // that waited for a sequence were cancelled unrun.
    const started = new Set(observed!.begun);
    const finished = new Set(out.map((l) => `Once upon a time, story req ${l.custom_id.slice(4)}:`));
    expect([...started].filter((p) => !finished.has(p))).toEqual([]);
    for (const l of out) expect(l.response.status_code).toBe(200);
  });
});

describe("expiry", () => {
  it("expires a running batch with partial results and a queued one with none", async () => {
    await startOneSlot();
    // Far more work than fits in three seconds on any test model (the generated one often stops early at
    // its end token, so the count, not the length, makes the work); the queued batch's window closes first.
    const long = await upload(cp, dir, completionJsonl(3000, { maxTokens: 128 }));
    const short = await upload(cp, dir, completionJsonl(4));
    const running = await cp.batches.create({ input_file_id: long.id, endpoint: "/v1/completions", completion_window: "3s", owner: null });
    await untilBatch(cp, running.id, inStatus("in_progress"));
    const queued = await cp.batches.create({ input_file_id: short.id, endpoint: "/v1/completions", completion_window: "1s", owner: null });

    const q = await untilBatch(cp, queued.id, inStatus("expired", "completed"));
    expect(q.status).toBe("expired");
    expect(q.in_progress_at).toBeNull();
    expect(q.request_counts).toEqual({ completed: 0, failed: 4, total: 4 });
    await expectAccounted(q, "batch_expired");

    const r = await untilBatch(cp, running.id, inStatus("expired", "completed"));
    expect(r.status).toBe("expired");
    expect(r.deadline_met).toBe(false);
    expect(r.expired_at).toBeGreaterThanOrEqual(r.deadline_at);
    const { out } = await expectAccounted(r, "batch_expired");
    expect(out.length).toBeGreaterThan(0);
    expect(out.length).toBeLessThan(3000);
    expect(r.usage.output_tokens).toBeGreaterThan(0);
  });
});

describe("cancel racing the deadline", () => {
  it("answers every cancel with the truth: either the cancel won, or the batch has expired", async () => {
    await startOneSlot();
    const long = await upload(cp, dir, completionJsonl(3000, { maxTokens: 128 }));
    const b = await cp.batches.create({ input_file_id: long.id, endpoint: "/v1/completions", completion_window: "2s", owner: null });
    await untilBatch(cp, b.id, inStatus("in_progress"));
    // Cancels every 5 ms from the deadline to 80 ms after it, as the expiry is being decided.
    const deadlineMs = b.deadline_at * 1000;
    await new Promise((r) => setTimeout(r, Math.max(0, deadlineMs - Date.now())));
    const answers: Array<Promise<string>> = [];
    while (Date.now() < deadlineMs + 80) {
      answers.push(cp.batches.cancel(b.id, null).then((x) => x.status));
      await new Promise((r) => setTimeout(r, 5));
    }
    const statuses = await Promise.all(answers);
    const final = await untilBatch(cp, b.id, inStatus("expired", "cancelled"));
    // No answer says in_progress about a batch whose end was already decided.
    expect(statuses.filter((s) => s === "in_progress")).toEqual([]);
    if (final.status === "cancelled") expect(statuses.every((s) => s === "cancelling" || s === "cancelled")).toBe(true);
    else expect(statuses.every((s) => s === "expired")).toBe(true);
    await expectAccounted(final, final.status === "cancelled" ? "batch_cancelled" : "batch_expired");
  });
});

describe("a state file that cannot be written", () => {
  it("never shows a final status the disk does not have, and lands it once the disk takes writes again", async () => {
    await startOneSlot();
    const N = 300;
    // Long in requests, so it still runs when its state file is taken away: counts move only as result lines are
    // flushed (every 200 ms), and a short batch could end before the swap.
    const file = await upload(cp, dir, completionJsonl(N, { prefix: "full", maxTokens: 16 }));
    const b = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    await untilBatch(cp, b.id, (x) => x.request_counts.completed >= 2);
    // Every write of batch.json fails from now on (a non-empty folder in its place), as on a full disk.
    const state = path.join(dir, b.id, "batch.json");
    rmSync(state);
    mkdirSync(state);
    writeFileSync(path.join(state, "keep"), "");
    await untilBatch(cp, b.id, (x) => x.request_counts.completed + x.request_counts.failed === N);
    // The run is over in this process, but its end could not be written: the batch shows what the disk has.
    await new Promise((r) => setTimeout(r, 500));
    expect((await cp.batches.get(b.id, null))!.status).toBe("in_progress");
    // Space returns: the final status lands within the retry period, and only then is shown.
    rmSync(state, { recursive: true });
    const done = await untilBatch(cp, b.id, inStatus("completed", "failed"), { timeoutMs: 10_000 });
    expect(done.status).toBe("completed");
    expect(JSON.parse(readFileSync(state, "utf8")).batch).toMatchObject({ status: "completed", request_counts: done.request_counts });
    expect(done.request_counts).toEqual({ completed: N, failed: 0, total: N });
    expect(readJsonl(path.join(dir, b.id, "output.jsonl"))).toHaveLength(N);
  });
});

describe("failure midway", () => {
  /** Holds the one slot while the test prepares the batch queued behind it, then lets it go. */
  async function behindABlocker(content: string, prepare: (batchDir: string) => void) {
    await startOneSlot();
    const blocker = await upload(cp, dir, completionJsonl(60, { maxTokens: 64, prefix: "blocker" }));
    const first = await cp.batches.create({
      input_file_id: blocker.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      owner: null,
    });
    await untilBatch(cp, first.id, inStatus("in_progress"));
    const file = await upload(cp, dir, content);
    const b = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    prepare(path.join(dir, b.id));
    await cp.batches.cancel(first.id, null);
    return untilBatch(cp, b.id, inStatus("failed", "completed", "cancelled"));
  }

  it("keeps the results it has and still counts every request when even its error file cannot be written", async () => {
    // The line that fails (a prompt too long for the context) is held until the error file is made unwritable, so
    // the results before it are on disk first whatever the start order and the machine's speed.
    let letThrough!: () => void;
    const gate = new Promise<void>((resolve) => (letThrough = resolve));
    cp = await bed.open({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" }, (engine) => holdLongPrompts(engine, gate));
    dir = bed.dir;
    // Forty good requests, then one too long for the context: its error line is where the disk fails.
    const lines = completionJsonl(50, { prefix: "mid", maxTokens: 24 }).trimEnd().split("\n");
    lines[40] = JSON.stringify({
      custom_id: "mid-40",
      method: "POST",
      url: "/v1/completions",
      body: { prompt: "Once upon a time there was a big dog. ".repeat(200), max_tokens: 4 },
    });
    const file = await upload(cp, dir, `${lines.join("\n")}\n`);
    const running = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    await untilBatch(cp, running.id, (x) => x.request_counts.completed >= 2);
    // No error line yet, so no error file: a directory in its place makes the first error line fail.
    mkdirSync(path.join(dir, running.id, "errors.jsonl"));
    letThrough();
    const b = await untilBatch(cp, running.id, inStatus("failed", "completed"));
    expect(b.status).toBe("failed");
    expect(b.errors!.data.at(-1)).toMatchObject({ code: "batch_failed" });
    const out = readJsonl(path.join(dir, b.id, "output.jsonl"));
    expect(out.length).toBeGreaterThanOrEqual(2);
    expect(out.length).toBeLessThan(50);
    expect(new Set(out.map((l) => l.custom_id)).size).toBe(out.length);
    expect(b.request_counts).toEqual({ completed: out.length, failed: 50 - out.length, total: 50 });
    expect(await cp.files.get(b.output_file_id!, null)).toBeDefined();
  });

  it("does not start a batch whose state cannot be saved: it waits, runs nothing, and runs once the disk takes writes", async () => {
    // A directory stands where the batch's state goes (as a full disk refuses it): the batch cannot be moved to
    // in_progress, so no request runs and it shows what its file says. Once writable, it runs to the end.
    let state = "";
    const prepared = behindABlocker(completionJsonl(6, { prefix: "early" }), (bdir) => {
      state = path.join(bdir, "batch.json");
      rmSync(state);
      mkdirSync(state);
    });
    await new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (!state) return;
        clearInterval(poll);
        resolve();
      }, 10);
    });
    const id = path.basename(path.dirname(state));
    await new Promise((r) => setTimeout(r, 1_500));
    const waiting = (await cp.batches.get(id, null))!;
    expect(waiting).toMatchObject({ status: "validating", request_counts: { completed: 0, failed: 0, total: 6 } });
    expect(existsSync(path.join(dir, id, "output.jsonl"))).toBe(false);
    rmSync(state, { recursive: true });
    const b = await prepared;
    expect(b.status).toBe("completed");
    expect(JSON.parse(readFileSync(state, "utf8")).batch.status).toBe("completed");
    expect(b.request_counts).toEqual({ completed: 6, failed: 0, total: 6 });
  });
});
