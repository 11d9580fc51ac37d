// Crash recovery: a control plane shut down mid-batch leaves the batch in_progress on disk; a new
// one on the same BATCH_DIR resumes it and never runs a custom_id twice.
import { appendFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { Engine } from "../../engine/types.js";
import { testModelName } from "../../testkit/model.js";
import { completionJsonl } from "../../testkit/workload.js";
import { controlTestbed, inStatus, readJsonl, untilBatch, upload } from "../helpers/embedded-plane.js";
import { type Observed, observe } from "../helpers/test-engine.js";

// One slot in all, so a second batch waits in the queue behind the first.
const bed = controlTestbed({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
let dir: string;

async function open(env: Record<string, string> = {}, engineFor?: (engine: Engine) => Engine) {
  const cp = await bed.open(env, engineFor);
  dir = bed.dir;
  return cp;
}

const stateOf = (id: string) => JSON.parse(readFileSync(path.join(dir, id, "batch.json"), "utf8"));

describe("recovery", () => {
  it("resumes a batch stopped by shutdown and runs every custom_id exactly once", async () => {
    const first = await open();
    const file = await upload(first, dir, completionJsonl(40, { maxTokens: 48 }), "alice");
    const running = await first.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      owner: "alice",
    });
    const queued = await first.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      owner: "alice",
    });
    await untilBatch(first, running.id, (b) => b.request_counts.completed >= 4, { owner: "alice" });

    await first.drain({ graceMs: 0 });
    await first.close();
    const stopped = stateOf(running.id);
    expect(stopped.batch.status).toBe("in_progress");
    expect(stateOf(queued.id).batch.status).toBe("validating");
    const before = readJsonl(path.join(dir, running.id, "output.jsonl")).length;
    expect(before).toBeGreaterThanOrEqual(4);
    expect(before).toBeLessThan(40);
    // A crash mid-append tears the last line; recovery must cut it off, not choke on it.
    appendFileSync(path.join(dir, running.id, "output.jsonl"), '{"id":"batch_req_torn","custom_id":"req-');

    const second = await open();
    expect(await second.files.get(file.id, "alice")).toBeDefined();
    const resumed = await untilBatch(second, running.id, inStatus("completed", "failed"), { owner: "alice" });
    expect(resumed.status).toBe("completed");
    expect(resumed.request_counts).toEqual({ completed: 40, failed: 0, total: 40 });
    const ids = [...readJsonl(path.join(dir, running.id, "output.jsonl")), ...readJsonl(path.join(dir, running.id, "errors.jsonl"))].map(
      (l) => l.custom_id,
    );
    expect(ids).toHaveLength(40);
    expect(new Set(ids).size).toBe(40);

    // The queued batch kept its place and ran after the resumed one.
    const q = await untilBatch(second, queued.id, inStatus("completed", "failed"), { owner: "alice" });
    expect(q.request_counts).toEqual({ completed: 40, failed: 0, total: 40 });
    expect(q.in_progress_at!).toBeGreaterThanOrEqual(resumed.in_progress_at!);
    expect((await second.batches.list({ limit: 10, owner: "alice" })).data.map((b) => b.id)).toEqual([queued.id, running.id]);
  });

  it("expires on start what passed its deadline while down, and finishes a cancel in flight", async () => {
    // One slot, so b waits while a runs, and a holds far more lines than run before the stop: however fast the
    // model, a is mid-run and b untouched when the service goes down.
    const first = await open({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
    const many = await upload(first, dir, completionJsonl(300, { maxTokens: 48 }));
    const file = await upload(first, dir, completionJsonl(30, { maxTokens: 48 }));
    const a = await first.batches.create({ input_file_id: many.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    const b = await first.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    await untilBatch(first, a.id, (x) => x.request_counts.completed >= 2);
    await first.drain({ graceMs: 0 });
    await first.close();

    // Simulate downtime: a's deadline is now in the past; b was being cancelled when the service died.
    const sa = stateOf(a.id);
    sa.batch.deadline_at = sa.batch.expires_at = Math.floor(Date.now() / 1000) - 5;
    writeFileSync(path.join(dir, a.id, "batch.json"), JSON.stringify(sa));
    const sb = stateOf(b.id);
    sb.batch.status = "cancelling";
    sb.batch.cancelling_at = Math.floor(Date.now() / 1000);
    writeFileSync(path.join(dir, b.id, "batch.json"), JSON.stringify(sb));

    const second = await open();
    const ea = (await second.batches.get(a.id, null))!;
    expect(ea.status).toBe("expired");
    expect(ea.deadline_met).toBe(false);
    expect(ea.request_counts.completed).toBeGreaterThanOrEqual(2);
    expect(ea.request_counts.completed + ea.request_counts.failed).toBe(300);
    const cb = (await second.batches.get(b.id, null))!;
    expect(cb.status).toBe("cancelled");
    expect(cb.request_counts).toEqual({ completed: 0, failed: 30, total: 30 });
    expect(readJsonl(path.join(dir, b.id, "errors.jsonl")).every((l) => l.error.code === "batch_cancelled")).toBe(true);
    expect(await second.status.queueStats()).toEqual({ depth: 0, max_depth: 100, running: 0 });
  });
});

describe("graceful shutdown", () => {
  it("drains: refuses new batches, lets requests in flight finish and be written, then the restart runs the rest", async () => {
    let counted!: Observed;
    const first = await open({ PIPELINE_CONCURRENCY: "8" }, (engine) => (counted = observe(engine)));
    // Many more requests than are in flight at once (8), so the drain always finds most of them not yet started,
    // however fast this machine runs the first ones.
    const n = 400;
    const file = await upload(first, dir, completionJsonl(n, { maxTokens: 48 }));
    const running = await first.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      owner: null,
    });
    await untilBatch(first, running.id, (b) => b.request_counts.completed >= 2);

    const closing = first.drain({ graceMs: 10_000 });
    await expect(
      first.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null }),
    ).rejects.toMatchObject({ code: "shutting_down", retryAfterSeconds: expect.any(Number) });
    await closing;
    await first.close();

    const out = readJsonl(path.join(dir, running.id, "output.jsonl"));
    // Every request that began on the engine finished and was written; none was cut short, and those still waiting
    // for a sequence were called off unrun.
    expect(out).toHaveLength(counted.begun.length);
    expect(out.length).toBeLessThan(n);
    expect(readJsonl(path.join(dir, running.id, "errors.jsonl"))).toEqual([]);
    const state = stateOf(running.id);
    expect(state.batch.status).toBe("in_progress");
    expect(state.batch.request_counts.completed).toBe(out.length);
    expect(readdirSync(dir).filter((n) => n.startsWith("batch_"))).toEqual([running.id]);

    const second = await open();
    const done = await untilBatch(second, running.id, inStatus("completed", "failed"));
    expect(done.request_counts).toEqual({ completed: n, failed: 0, total: n });
    const ids = readJsonl(path.join(dir, running.id, "output.jsonl")).map((l) => l.custom_id);
    expect(new Set(ids).size).toBe(n);
  });
});

describe("upgrade", () => {
  it("picks up a BATCH_DIR written by the previous version: its files, its finished batch, and a running batch resumed in place", async () => {
    // The folder as the old server left it (an empty plane opened and closed first only creates it).
    await (await open()).close();
    const t = Math.floor(Date.now() / 1000);
    const lines = completionJsonl(12, { prefix: "old" });
    const id = "batch_0123456789abcdefABCDEF01";
    const fileId = "file-0123456789abcdefABCDEF01";
    mkdirSync(path.join(dir, id), { recursive: true });
    writeFileSync(path.join(dir, id, "input.jsonl"), lines);
    writeFileSync(path.join(dir, "files", `${fileId}.jsonl`), lines);
    // Three results written before the old server stopped (and counted in its batch.json), one torn.
    const result = (i: number) =>
      JSON.stringify({
        id: `batch_req_${i}`,
        custom_id: `old-${i}`,
        response: {
          status_code: 200,
          request_id: `r${i}`,
          body: { object: "text_completion", usage: { prompt_tokens: 5, completion_tokens: 2 } },
        },
        error: null,
      });
    writeFileSync(path.join(dir, id, "output.jsonl"), `${[0, 1, 2].map(result).join("\n")}\n{"id":"batch_req_3","cus`);
    const counts = { total: 12, completed: 3, failed: 0 };
    const usage = {
      input_tokens: 15,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 6,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 21,
    };
    const batch = {
      id,
      object: "batch",
      endpoint: "/v1/completions",
      // The model the old server served: the test model (stories260K beside the repository, else the generated one).
      model: await testModelName(),
      errors: null,
      input_file_id: fileId,
      completion_window: "24h",
      status: "in_progress",
      output_file_id: null,
      error_file_id: null,
      created_at: t - 60,
      in_progress_at: t - 59,
      expires_at: t + 86_000,
      finalizing_at: null,
      completed_at: null,
      failed_at: null,
      expired_at: null,
      cancelling_at: null,
      cancelled_at: null,
      request_counts: counts,
      usage,
      metadata: null,
      submitted_at: t - 60,
      deadline_at: t + 86_000,
      deadline_met: null,
      pool: "spot",
    };
    writeFileSync(path.join(dir, id, "batch.json"), JSON.stringify({ version: 1, owner: "alice", seq: 7, batch }));
    const file = {
      id: fileId,
      object: "file",
      bytes: lines.length,
      created_at: t - 61,
      filename: "in.jsonl",
      purpose: "batch",
      status: "processed",
      expires_at: t + 3600,
    };
    writeFileSync(
      path.join(dir, "files", `${fileId}.json`),
      JSON.stringify({ version: 1, owner: "alice", path: `files/${fileId}.jsonl`, managed: true, file }),
    );

    const cp = await open();
    expect((await cp.files.get(fileId, "alice"))?.object).toEqual(file);
    const done = await untilBatch(cp, id, inStatus("completed", "failed"), { owner: "alice" });
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ completed: 12, failed: 0, total: 12 });
    const ids = readJsonl(path.join(dir, id, "output.jsonl")).map((l) => l.custom_id);
    expect(ids.sort()).toEqual(customIdsOf(12).sort());
    // The three lines written before the upgrade were kept as they were, not run again.
    expect(
      readJsonl(path.join(dir, id, "output.jsonl"))
        .slice(0, 3)
        .map((l) => l.id),
    ).toEqual(["batch_req_0", "batch_req_1", "batch_req_2"]);
    // A later batch lists first: the order goes on from the old records.
    const next = await cp.batches.create({ input_file_id: fileId, endpoint: "/v1/completions", completion_window: "24h", owner: "alice" });
    expect((await cp.batches.list({ limit: 2, owner: "alice" })).data.map((b) => b.id)).toEqual([next.id, id]);
  });
});

const customIdsOf = (n: number) => Array.from({ length: n }, (_, i) => `old-${i}`);
