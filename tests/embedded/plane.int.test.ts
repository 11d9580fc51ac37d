// The control plane end to end with the real engine: create -> queue -> pool -> pipeline -> files.
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { ControlPlane } from "../../app/control-plane.js";
import { InvalidRequestError, NotFoundError } from "../../domain/errors.js";
import { completionJsonl } from "../../testkit/workload.js";
import { controlTestbed, inStatus, pathOf, readJsonl, untilBatch, upload } from "../helpers/embedded-plane.js";

const bed = controlTestbed();
let dir: string;
let cp: ControlPlane;

async function start(env: Record<string, string> = {}) {
  cp = await bed.open(env);
  dir = bed.dir;
  return cp;
}

describe("control plane with the real engine", () => {
  it("runs a file-submitted batch to completion with its output file", async () => {
    await start();
    const file = await upload(cp, dir, completionJsonl(6));
    const created = await cp.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      metadata: { run: "t1" },
      owner: null,
    });
    expect(created).toMatchObject({
      status: "validating",
      request_counts: { completed: 0, failed: 0, total: 6 },
      input_file_id: file.id,
      metadata: { run: "t1" },
    });
    expect(created.id).toMatch(/^batch_[a-f0-9]{24}$/);
    expect(created.deadline_at - created.submitted_at).toBe(86_400);

    const b = await untilBatch(cp, created.id, inStatus("completed", "failed"));
    expect(b.status).toBe("completed");
    expect(b.request_counts).toEqual({ completed: 6, failed: 0, total: 6 });
    expect(b).toMatchObject({ deadline_met: true, pool: "spot", error_file_id: null });
    expect(b.in_progress_at).not.toBeNull();
    expect(b.finalizing_at).not.toBeNull();
    expect(b.completed_at).not.toBeNull();
    expect(b.usage.output_tokens).toBeGreaterThan(0);
    expect(b.usage.total_tokens).toBe(b.usage.input_tokens + b.usage.output_tokens);

    const batchDir = path.join(dir, b.id);
    // The batch keeps the upload under its own name (a hard link of the same content).
    expect(readFileSync(path.join(batchDir, "input.jsonl"), "utf8")).toBe(completionJsonl(6));
    expect(existsSync(path.join(batchDir, "errors.jsonl"))).toBe(false);
    const out = (await cp.files.get(b.output_file_id!, null))!;
    const outPath = (await pathOf(cp, dir, b.output_file_id!, null))!;
    expect(out.object).toMatchObject({ purpose: "batch_output", bytes: statSync(outPath).size });
    expect(outPath).toBe(path.join(batchDir, "output.jsonl"));
    const lines = readJsonl(outPath);
    expect(lines.map((l) => l.custom_id).sort()).toEqual(["req-0", "req-1", "req-2", "req-3", "req-4", "req-5"]);
    for (const l of lines) expect(l.response.body.choices[0].text).toEqual(expect.any(String));
    const results: string[] = [];
    for await (const line of (await cp.batches.results(b.id, null))!) results.push(line);
    expect(results.map((l) => JSON.parse(l).custom_id)).toEqual(lines.map((l) => l.custom_id));
    const opened = await cp.files.open(b.output_file_id!, null);
    expect(opened).toMatchObject({ object: { id: b.output_file_id }, size: statSync(outPath).size });
    opened!.content.destroy();
    expect(await cp.files.open(b.output_file_id!, "someone-else")).toBeUndefined();

    expect((await cp.status.poolStatus()).every((p) => p.in_use === 0)).toBe(true);
    expect(await cp.status.queueStats()).toEqual({ depth: 0, max_depth: 100, running: 0 });
    await cp.close(); // flushes state writes
    const onDisk = JSON.parse(readFileSync(path.join(batchDir, "batch.json"), "utf8"));
    // The record is the batch as read, less what is computed as it is read (its cost, its projected finish).
    const { cost: _c, projected_finish_at: _p, deadline_at_risk: _r, ...stored } = b;
    expect(onDisk).toMatchObject({ version: 2, owner: null, batch: stored, stopReason: null, shards: [{ state: "done" }] });
  });

  it("runs an inline batch whose input is a real file", async () => {
    await start();
    const lines = [0, 1, 2].map((i) => ({
      custom_id: `chat-${i}`,
      method: "POST" as const,
      url: "/v1/chat/completions" as const,
      body: { model: "stories260K", messages: [{ role: "user", content: `Tell story ${i}` }], max_tokens: 6 },
    }));
    const created = await cp.batches.createInline({ endpoint: "/v1/chat/completions", completion_window: "1h", lines, owner: "alice" });
    const input = (await cp.files.get(created.input_file_id, "alice"))!;
    expect(input.object.purpose).toBe("batch");
    expect(readJsonl((await pathOf(cp, dir, created.input_file_id, "alice"))!)).toEqual(lines);
    const b = await untilBatch(cp, created.id, inStatus("completed", "failed"), { owner: "alice" });
    expect(b.request_counts).toEqual({ completed: 3, failed: 0, total: 3 });
    // Owner isolation reaches batches and their result files.
    expect(await cp.batches.get(b.id, "bob")).toBeUndefined();
    expect(await cp.files.get(b.output_file_id!, "bob")).toBeUndefined();
    expect((await cp.batches.list({ limit: 10, owner: "alice" })).data.map((x) => x.id)).toEqual([b.id]);
    expect((await cp.batches.list({ limit: 10, owner: "bob" })).data).toEqual([]);
  });

  it("fails an invalid file at creation with line errors and runs nothing", async () => {
    await start();
    const content = `${completionJsonl(2)}not json\n${JSON.stringify({ custom_id: "x", method: "POST", url: "/v1/embeddings", body: {} })}\n`;
    const file = await upload(cp, dir, content);
    const b = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    expect(b.status).toBe("failed");
    expect(b.failed_at).not.toBeNull();
    expect(b.request_counts).toEqual({ completed: 0, failed: 0, total: 0 });
    expect(b.errors!.object).toBe("list");
    expect(b.errors!.data.map((e) => e.line)).toEqual([3, 4]);
    expect(b.errors!.data[1]).toMatchObject({ code: "mismatched_url", param: "url" });
    expect((await cp.status.queueStats()).depth).toBe(0);
    expect(existsSync(path.join(dir, b.id, "output.jsonl"))).toBe(false);
  });

  it("refuses a missing input file (not found) and a bad completion window (invalid), in its own terms", async () => {
    await start();
    const missing = cp.batches.create({ input_file_id: "file-nope", endpoint: "/v1/completions", completion_window: "24h", owner: null });
    await expect(missing).rejects.toBeInstanceOf(NotFoundError);
    await expect(missing).rejects.toMatchObject({ code: "not_found", param: "input_file_id" });
    const file = await upload(cp, dir, completionJsonl(1), "alice");
    await expect(
      cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: "bob" }),
    ).rejects.toBeInstanceOf(NotFoundError);
    const bad = cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "soon", owner: "alice" });
    await expect(bad).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(bad).rejects.toMatchObject({ param: "completion_window" });
    await expect(cp.batches.cancel("batch_nope", null)).rejects.toBeInstanceOf(NotFoundError);
  });

  it("refuses with queue_full and a retry delay when the queue is full", async () => {
    await start({ MAX_QUEUE_DEPTH: "1", SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
    const file = await upload(cp, dir, completionJsonl(40, { maxTokens: 48 }));
    const create = () => cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    const running = await create();
    await untilBatch(cp, running.id, inStatus("in_progress"));
    const queued = await create();
    await expect(create()).rejects.toMatchObject({ code: "queue_full", retryAfterSeconds: 30 });
    // An inline batch refused takes its input file with it: nothing is listed that the client did not upload.
    const filesBefore = (await cp.files.list({ limit: 100, order: "desc", owner: null })).data.map((f) => f.id);
    for (let i = 0; i < 3; i++) {
      const inline = cp.batches.createInline({
        endpoint: "/v1/completions",
        completion_window: "24h",
        lines: [{ custom_id: "a", method: "POST", url: "/v1/completions", body: { prompt: "Hi", max_tokens: 2 } }],
        owner: null,
      });
      await expect(inline).rejects.toMatchObject({ code: "queue_full" });
    }
    expect((await cp.files.list({ limit: 100, order: "desc", owner: null })).data.map((f) => f.id)).toEqual(filesBefore);
    expect(await cp.status.queueStats()).toMatchObject({ depth: 1, max_depth: 1, running: 1 });
    await cp.batches.cancel(queued.id, null);
    await cp.batches.cancel(running.id, null);
  });

  it("fails a batch that breaks midway, releases its slot and keeps serving", async () => {
    await start({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
    const long = await upload(cp, dir, completionJsonl(60, { maxTokens: 64 }));
    const file = await upload(cp, dir, completionJsonl(3));
    // The long batch holds the one slot while the broken one is prepared behind it.
    const first = await cp.batches.create({ input_file_id: long.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    await untilBatch(cp, first.id, inStatus("in_progress"));
    const broken = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    // A directory where the results should go: the job cannot write its output.
    mkdirSync(path.join(dir, broken.id, "output.jsonl"));
    const after = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    expect((await cp.batches.cancel(first.id, null)).status).toBe("cancelling");

    const b = await untilBatch(cp, broken.id, inStatus("failed", "completed"));
    expect(b.status).toBe("failed");
    expect(b.errors!.data.at(-1)).toMatchObject({ code: "batch_failed" });
    expect((await untilBatch(cp, first.id, inStatus("cancelled"))).status).toBe("cancelled");
    expect((await untilBatch(cp, after.id, inStatus("completed", "failed"))).status).toBe("completed");
    expect((await cp.status.poolStatus())[0]).toMatchObject({ in_use: 0, jobs: [] });
  });
});
