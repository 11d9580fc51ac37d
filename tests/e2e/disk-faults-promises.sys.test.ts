// Three promises the disk-fault trials found broken, under the real server process with BATCH_DIR on an ext4 file
// system of its own: /ready says the disk is full as soon as a write meets ENOSPC (and ok again once space is
// freed); a server killed mid-batch on a full disk starts again degraded, serving reads; and a file deleted on a
// read-only disk is either gone for good or still there, never listed as gone while its record stays on disk.
// Needs root and e2fsprogs: skipped with a note elsewhere.
import { existsSync, rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { until } from "../../testkit/batch-client.js";
import { completionJsonl } from "../../testkit/workload.js";
import { createBatch, getBatch, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { loopDisk } from "../helpers/loop-disk.js";

// A disk of its own each, so a test that fails with its disk full leaves the next one a clean disk.
const disks = [loopDisk("disk-ready"), loopDisk("disk-restart"), loopDisk("disk-delete")];
const skip = disks[0].skip;
if (skip) console.warn(`disk-faults-promises.test: skipped, ${skip}`);
afterAll(() => {
  for (const d of disks) d.remove();
});

/** The disk's state as /ready says it: 200 while it is ok, 503 (a probe takes the server out) while it is not. */
async function storageState(base: string): Promise<string> {
  const res = await fetch(`${base}/ready`);
  const { state } = ((await res.json()) as { storage: { state: string } }).storage;
  expect(res.status, state).toBe(state === "ok" ? 200 : 503);
  return state;
}

describe.skipIf(skip !== undefined)("disk-fault promises under the real process", () => {
  it("a write that meets a full disk turns /ready's storage to full; a server stopped there starts again; freed, it is ok", async () => {
    const disk = disks[0];
    let s = await disk.start();
    let filler = "";
    try {
      const file = await uploadJsonl(s.baseUrl, completionJsonl(20, { prefix: "ready" }));
      expect(await storageState(s.baseUrl)).toBe("ok");
      filler = disk.fill(s);
      const refused = await createBatch(s.baseUrl, file.id);
      expect(refused.status).toBe(507);
      // At once, not at the next heartbeat: the write that failed said so.
      expect(await storageState(s.baseUrl)).toBe("full");
      // A graceful stop removes its lock; the next start takes one with not a block free.
      s.child.kill("SIGTERM");
      expect(await s.exited).toBe(0);
      s = await disk.start();
      expect(await storageState(s.baseUrl)).toBe("full");
      expect((await fetch(`${s.baseUrl}/v1/files/${file.id}`)).status).toBe(200);
      rmSync(disk.inside(s, "filler"), { force: true });
      filler = "";
      await until("storage ok again", async () => ((await storageState(s.baseUrl)) === "ok" ? true : undefined));
      expect((await createBatch(s.baseUrl, file.id)).status).toBe(200);
    } finally {
      if (filler && existsSync(filler)) rmSync(filler, { force: true });
      s.child.kill("SIGKILL");
    }
  }, 120_000);

  it("killed mid-batch on a full disk, the server starts degraded, then finishes the batch once space is freed", async () => {
    const disk = disks[1];
    let s = await disk.start({ SEQUENCES: "1" });
    let filler = "";
    try {
      const file = await uploadJsonl(s.baseUrl, completionJsonl(40, { prefix: "midrun", maxTokens: 64 }));
      const created = await createBatch(s.baseUrl, file.id);
      expect(created.status).toBe(200);
      const id = created.body.id as string;
      await pollBatch(s.baseUrl, id, (b) => b.status === "in_progress");
      filler = disk.fill(s);
      s.child.kill("SIGKILL");
      await s.exited;
      s = await disk.start({ SEQUENCES: "1" });
      expect(await storageState(s.baseUrl)).toBe("full");
      const batch = await getBatch(s.baseUrl, id);
      expect(batch.id).toBe(id);
      expect((await fetch(`${s.baseUrl}/v1/files/${file.id}/content`)).status).toBe(200);
      rmSync(disk.inside(s, "filler"), { force: true });
      filler = "";
      const done = await pollBatch(s.baseUrl, id, (b) => b.status === "completed", 120_000);
      expect(done.request_counts).toMatchObject({ total: 40, completed: 40, failed: 0 });
      const lines = (await (await fetch(`${s.baseUrl}/v1/files/${done.output_file_id}/content`)).text()).trim().split("\n");
      const ids = lines.map((l) => JSON.parse(l).custom_id as string);
      expect(new Set(ids).size).toBe(40);
      expect(ids).toHaveLength(40);
    } finally {
      if (filler && existsSync(filler)) rmSync(filler, { force: true });
      s.child.kill("SIGKILL");
    }
  }, 240_000);

  it("a delete refused by a read-only disk leaves the file listed, and one that succeeds stays done after a restart", async () => {
    const disk = disks[2];
    // The remount to read-only is refused while the result cache's LMDB file is open for writing: the cache is off.
    let s = await disk.start({ RESULT_CACHE: "off" });
    try {
      const file = await uploadJsonl(s.baseUrl, completionJsonl(2, { prefix: "del" }));
      disk.remount(s, "ro");
      const refused = await fetch(`${s.baseUrl}/v1/files/${file.id}`, { method: "DELETE" });
      expect(refused.status).toBe(503);
      // Refused means nothing changed: the file is still there for the retry the 503 asks for.
      expect((await fetch(`${s.baseUrl}/v1/files/${file.id}`)).status).toBe(200);
      const listed = (await (await fetch(`${s.baseUrl}/v1/files`)).json()) as { data: Array<{ id: string }> };
      expect(listed.data.map((f) => f.id)).toContain(file.id);
      disk.remount(s, "rw");
      const deleted = await fetch(`${s.baseUrl}/v1/files/${file.id}`, { method: "DELETE" });
      expect(deleted.status).toBe(200);
      expect((await deleted.json()) as object).toMatchObject({ id: file.id, deleted: true });
      s.child.kill("SIGKILL");
      await s.exited;
      s = await disk.start();
      expect((await fetch(`${s.baseUrl}/v1/files/${file.id}`)).status).toBe(404);
    } finally {
      s.child.kill("SIGKILL");
    }
  }, 120_000);
});
