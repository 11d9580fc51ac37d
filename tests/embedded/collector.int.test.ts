// Housekeeping with the real engine: expired files and batch folders go, running and queued batches
// are never touched, and what a crash left half-written is cleaned away at start.
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { ControlPlane } from "../../app/control-plane.js";
import { completionJsonl } from "../../testkit/workload.js";
import { controlTestbed, inStatus, readJsonl, untilBatch, upload } from "../helpers/embedded-plane.js";

const DAY = 86_400;
// One slot in all, so a second batch waits in the queue behind the first.
const bed = controlTestbed({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
let cp: ControlPlane;
let dir: string;
async function start(env: Record<string, string> = {}) {
  cp = await bed.open(env);
  dir = bed.dir;
  return cp;
}

const create = (fileId: string) =>
  cp.batches.create({ input_file_id: fileId, endpoint: "/v1/completions", completion_window: "24h", owner: null });
const now = () => Math.floor(Date.now() / 1000);

describe("the collector", () => {
  it("deletes expired files and finished batch folders, never a running or queued batch", async () => {
    await start();
    const small = await upload(cp, dir, completionJsonl(3, { prefix: "done" }));
    const finished = await untilBatch(cp, (await create(small.id)).id, inStatus("completed"));
    const inline = await cp.batches.createInline({
      endpoint: "/v1/completions",
      completion_window: "24h",
      lines: [{ custom_id: "i-0", method: "POST", url: "/v1/completions", body: { prompt: "Once", max_tokens: 2 } }],
      owner: null,
    });
    const inlineDone = await untilBatch(cp, inline.id, inStatus("completed"));
    const long = await upload(cp, dir, completionJsonl(600, { prefix: "long", maxTokens: 64 }));
    const running = await create(long.id);
    const queued = await create(small.id);
    await untilBatch(cp, running.id, inStatus("in_progress"));

    // Nothing is due yet.
    expect(await cp.maintenance.collect(now() + 29 * DAY)).toEqual({ files: 0, batches: 0 });

    const swept = await cp.maintenance.collect(now() + 31 * DAY);
    // Two uploads, the finished batch's output, the inline batch's input and output.
    expect(swept).toEqual({ files: 5, batches: 2 });
    for (const b of [finished, inlineDone]) {
      expect(await cp.batches.get(b.id, null)).toBeUndefined();
      expect(existsSync(path.join(dir, b.id))).toBe(false);
      expect(await cp.files.get(b.output_file_id!, null)).toBeUndefined();
    }
    expect(await cp.files.get(inline.input_file_id, null)).toBeUndefined();
    expect(await cp.files.get(small.id, null)).toBeUndefined();
    expect(readdirSync(path.join(dir, "files")).filter((n) => n.startsWith("file-"))).toEqual([]);

    // The running and the queued batch kept their folders and run on to the end: each has its own
    // link to its input, so the expired upload going away cannot break them.
    for (const b of [running, queued]) expect(existsSync(path.join(dir, b.id, "batch.json"))).toBe(true);
    await cp.batches.cancel(running.id, null);
    const cancelled = await untilBatch(cp, running.id, inStatus("cancelled"));
    expect(cancelled.request_counts.completed + cancelled.request_counts.failed).toBe(600);
    const q = await untilBatch(cp, queued.id, inStatus("completed", "failed"));
    expect(q.status).toBe("completed");
    expect(
      readJsonl(path.join(dir, q.id, "output.jsonl"))
        .map((l) => l.custom_id)
        .sort(),
    ).toEqual(["done-0", "done-1", "done-2"]);

    // Once they are over and their time has come, they go too.
    expect(await cp.maintenance.collect(now() + 62 * DAY)).toMatchObject({ batches: 2 });
    expect((await cp.batches.list({ limit: 100, owner: null })).data).toEqual([]);
    expect((await cp.files.list({ limit: 100, order: "desc", owner: null })).data).toEqual([]);
  });

  it("honours expires_after on a file and output_expires_after on a batch's output, and keeps the rest", async () => {
    await start();
    const HOUR = 3600;
    const upload1h = await upload(cp, dir, completionJsonl(1), null, { anchor: "created_at", seconds: HOUR });
    expect(upload1h.expires_at).toBe(upload1h.created_at + HOUR);
    const input = await upload(cp, dir, completionJsonl(2, { prefix: "out" }));
    const b = await cp.batches.create({
      input_file_id: input.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      output_expires_after: { anchor: "created_at", seconds: 2 * HOUR },
      owner: null,
    });
    const done = await untilBatch(cp, b.id, inStatus("completed"));
    const output = (await cp.files.get(done.output_file_id!, null))!.object;
    expect(output.expires_at).toBe(output.created_at + 2 * HOUR);

    expect(await cp.maintenance.collect(now() + HOUR + 5)).toEqual({ files: 1, batches: 0 });
    expect(await cp.files.get(upload1h.id, null)).toBeUndefined();
    expect(await cp.maintenance.collect(now() + 2 * HOUR + 5)).toEqual({ files: 1, batches: 0 });
    expect(await cp.files.get(done.output_file_id!, null)).toBeUndefined();
    expect(existsSync(path.join(dir, b.id, "output.jsonl"))).toBe(false);
    // The batch no longer names a file that is gone.
    expect((await cp.batches.get(b.id, null))!.output_file_id).toBeNull();
    // The input upload keeps the default 30 days, and so does the batch itself.
    expect(await cp.files.get(input.id, null)).toBeDefined();
    expect(await cp.batches.get(b.id, null)).toBeDefined();
  });

  it("keeps output_expires_after across a restart", async () => {
    await start();
    // The one slot is busy, so the batch is still queued when the service restarts.
    const running = await create((await upload(cp, dir, completionJsonl(600, { prefix: "long", maxTokens: 64 }))).id);
    await untilBatch(cp, running.id, inStatus("in_progress"));
    const input = await upload(cp, dir, completionJsonl(1));
    const b = await cp.batches.create({
      input_file_id: input.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      output_expires_after: { anchor: "created_at", seconds: 5000 },
      owner: null,
    });
    await cp.close();
    cp = await bed.open();
    await cp.batches.cancel(running.id, null);
    const done = await untilBatch(cp, b.id, inStatus("completed"));
    const output = (await cp.files.get(done.output_file_id!, null))!.object;
    expect(output.expires_at).toBe(output.created_at + 5000);
  });

  it("runs on its own every COLLECT_INTERVAL_SECONDS", async () => {
    await start({ FILE_EXPIRY_SECONDS: "1", COLLECT_INTERVAL_SECONDS: "1" });
    const f = await upload(cp, dir, completionJsonl(1));
    expect(await cp.files.get(f.id, null)).toBeDefined();
    const deadline = Date.now() + 10_000;
    while ((await cp.files.get(f.id, null)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(await cp.files.get(f.id, null)).toBeUndefined();
  });
});

describe("start-up cleanup", () => {
  it("removes what a crash left half-written and nothing else", async () => {
    await start();
    const f = await upload(cp, dir, completionJsonl(2));
    const b = await untilBatch(cp, (await create(f.id)).id, inStatus("completed"));
    await cp.close();

    const bdir = path.join(dir, b.id);
    // An atomic write cut short, a batch whose creation never reached batch.json, a partial upload,
    // upload content whose metadata was never written...
    writeFileSync(path.join(bdir, "batch.json.1234.abcd.tmp"), "{");
    mkdirSync(path.join(dir, "batch_0123456789abcdef01234567"));
    writeFileSync(path.join(dir, "batch_0123456789abcdef01234567", "input.jsonl"), "{}\n");
    // ...with its inline input already recorded as a file (killed between the record and batch.json)...
    const orphanRecord = "file-bbbbbbbbbbbbbbbbbbbbbbbb";
    writeFileSync(
      path.join(dir, "files", `${orphanRecord}.json`),
      JSON.stringify({
        version: 1,
        owner: null,
        path: "batch_0123456789abcdef01234567/input.jsonl",
        managed: false,
        file: {
          id: orphanRecord,
          object: "file",
          bytes: 3,
          created_at: now(),
          filename: "x_input.jsonl",
          purpose: "batch",
          status: "processed",
          expires_at: null,
        },
      }),
    );
    writeFileSync(path.join(dir, "files", "file-0123456789abcdef01234567.json.99.ff.tmp"), "{");
    writeFileSync(path.join(dir, "files", "file-aaaaaaaaaaaaaaaaaaaaaaaa.jsonl"), "orphan\n");
    mkdirSync(path.join(dir, "files", ".uploads"), { recursive: true });
    writeFileSync(path.join(dir, "files", ".uploads", "3f2a9c"), "partial");
    // ...and things that are not ours, which BATCH_DIR (often /tmp) may well hold.
    writeFileSync(path.join(dir, "someone-else.tmp"), "keep");
    mkdirSync(path.join(dir, "batch_not_ours"));
    writeFileSync(path.join(dir, "batch_not_ours", "x.tmp"), "keep");

    await start();
    expect(readdirSync(bdir).sort()).toEqual(["batch.json", "input.jsonl", "output.jsonl"]);
    expect(existsSync(path.join(dir, "batch_0123456789abcdef01234567"))).toBe(false);
    expect(readdirSync(path.join(dir, "files")).sort()).toEqual(
      [`${f.id}.json`, `${f.id}.jsonl`, `${b.output_file_id}.json`, ".uploads"].sort(),
    );
    expect(readdirSync(path.join(dir, "files", ".uploads"))).toEqual([]);
    expect(existsSync(path.join(dir, "someone-else.tmp"))).toBe(true);
    expect(existsSync(path.join(dir, "batch_not_ours", "x.tmp"))).toBe(true);
    expect(await cp.files.get(orphanRecord, null)).toBeUndefined();
    // What was whole is served as before.
    expect(await cp.batches.get(b.id, null)).toEqual(b);
    expect(await cp.files.get(f.id, null)).toBeDefined();
  });
});
