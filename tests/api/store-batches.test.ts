import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Batch } from "../../api/schemas/objects.js";
import { BatchStore } from "../../api/stores/batch-store.js";
import { newBatchId } from "../../api/stores/ids.js";

const logger = pino({ level: "silent" });
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-batches-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const open = () => BatchStore.open({ batchDir: dir, logger, throttleMs: 10 });

function batch(id: string, created: number): Batch {
  return {
    id,
    object: "batch",
    endpoint: "/v1/completions",
    errors: null,
    input_file_id: "file-x",
    completion_window: "24h",
    status: "validating",
    output_file_id: null,
    error_file_id: null,
    created_at: created,
    in_progress_at: null,
    expires_at: created + 86_400,
    finalizing_at: null,
    completed_at: null,
    failed_at: null,
    expired_at: null,
    cancelling_at: null,
    cancelled_at: null,
    request_counts: { completed: 0, failed: 0, total: 3 },
    usage: {
      input_tokens: 0,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 0,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 0,
    },
    metadata: null,
    submitted_at: created,
    deadline_at: created + 86_400,
    deadline_met: null,
    pool: null,
  };
}

async function addBatch(store: BatchStore, owner: string | null, created = 1000) {
  const id = newBatchId();
  mkdirSync(store.paths(id).dir);
  store.add({ batch: batch(id, created), owner, seq: store.nextSeq() });
  await store.save(id);
  return id;
}

describe("batch store", () => {
  it("persists batch.json (owner, seq, batch) and reloads it", async () => {
    const store = await open();
    const a = await addBatch(store, "alice");
    const b = await addBatch(store, null);
    const rec = store.get(a)!;
    rec.batch.request_counts.completed = 2;
    await store.save(a);
    const onDisk = JSON.parse(readFileSync(store.paths(a).state, "utf8"));
    expect(onDisk).toMatchObject({ owner: "alice", seq: 1, batch: { id: a, request_counts: { completed: 2 } } });

    const reloaded = await open();
    expect(reloaded.get(a)).toEqual(rec);
    expect(reloaded.get(b)?.seq).toBe(2);
    expect(reloaded.nextSeq()).toBe(3);
    expect(reloaded.all().map((r) => r.batch.id)).toEqual([a, b]);
  });

  it("lists newest first with an after cursor, per owner", async () => {
    const store = await open();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await addBatch(store, "alice", 1000 + i));
    const other = await addBatch(store, "bob");
    const newestFirst = [...ids].reverse();
    const p1 = store.list({ limit: 2, owner: "alice" });
    expect(p1.data.map((b) => b.id)).toEqual(newestFirst.slice(0, 2));
    expect(p1.has_more).toBe(true);
    const p2 = store.list({ limit: 10, owner: "alice", after: p1.data[1].id });
    expect(p2.data.map((b) => b.id)).toEqual(newestFirst.slice(2));
    expect(p2.has_more).toBe(false);
    expect(store.list({ limit: 10, owner: "bob" }).data.map((b) => b.id)).toEqual([other]);
    expect(store.get(other, "alice")).toBeUndefined();
    expect(store.get(other, "bob")).toBeDefined();
  });

  it("touch() coalesces progress writes and close() flushes them", async () => {
    const store = await open();
    const id = await addBatch(store, null);
    store.get(id)!.batch.request_counts.completed = 1;
    store.touch(id);
    store.get(id)!.batch.request_counts.completed = 2;
    store.touch(id);
    await store.close();
    expect(JSON.parse(readFileSync(store.paths(id).state, "utf8")).batch.request_counts.completed).toBe(2);
    // A closed store writes nothing more.
    store.get(id)!.batch.request_counts.completed = 3;
    await store.save(id);
    expect(JSON.parse(readFileSync(store.paths(id).state, "utf8")).batch.request_counts.completed).toBe(2);
  });

  it("reads only batch_<id> folders and skips broken state", async () => {
    const store = await open();
    const good = await addBatch(store, null);
    mkdirSync(path.join(dir, "batch_not-an-id"));
    writeFileSync(path.join(dir, "batch_not-an-id", "batch.json"), JSON.stringify({ batch: batch("batch_not-an-id", 1) }));
    mkdirSync(path.join(dir, "someone-elses-dir"));
    const broken = newBatchId();
    mkdirSync(path.join(dir, broken));
    writeFileSync(path.join(dir, broken, "batch.json"), "{torn");
    const empty = newBatchId();
    mkdirSync(path.join(dir, empty));
    const reloaded = await open();
    expect(reloaded.all().map((r) => r.batch.id)).toEqual([good]);
  });
});
