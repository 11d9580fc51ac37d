// Disk faults an operator meets, under the real server process with BATCH_DIR on an ext4 file system of its own:
// remounted read-only while the server is idle, and filled to its last byte (then a crash, and a start on the full
// disk). Every write route answers 503 storage_unavailable or 507 with nothing left behind, reads go on, and a
// graceful stop still exits 0. Needs root and e2fsprogs: skipped with a note elsewhere.
import { existsSync, readdirSync, rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { logLines, uploadJsonl } from "../helpers/http-batches.js";
import { loopDisk } from "../helpers/loop-disk.js";

const disk = loopDisk("disk-faults");
if (disk.skip) console.warn(`disk-faults.test: skipped, ${disk.skip}`);
afterAll(() => disk.remove());

const post = (base: string, path: string, body: unknown) =>
  fetch(`${base}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
const upload = (base: string, text: string) => {
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([text]), "x.jsonl");
  return fetch(`${base}/v1/files`, { method: "POST", body: form });
};
const createBatch = (base: string, fileId: string) =>
  post(base, "/v1/batches", { input_file_id: fileId, endpoint: "/v1/completions", completion_window: "24h" });
const anthropicBatch = (base: string) =>
  post(base, "/v1/messages/batches", {
    requests: [{ custom_id: "a", params: { model: "m", max_tokens: 2, messages: [{ role: "user", content: "x" }] } }],
  });

describe.skipIf(disk.skip !== undefined)("disk faults under the real process", () => {
  it("read-only: every write answers 503 storage_unavailable with Retry-After, reads go on, a graceful stop exits 0", async () => {
    // `mount -o remount,ro` is refused while a file is open for writing, as the result cache's LMDB file is (a disk
    // the kernel makes read-only after an error has no such check): the cache is off here.
    const s = await disk.start({ RESULT_CACHE: "off" });
    try {
      const file = await uploadJsonl(s.baseUrl, completionJsonl(3, { prefix: "ro" }));
      disk.remount(s, "ro");
      const writes = {
        "file-form create": await createBatch(s.baseUrl, file.id),
        upload: await upload(s.baseUrl, completionJsonl(1, { prefix: "x" })),
        "Anthropic create": await anthropicBatch(s.baseUrl),
      };
      for (const [what, res] of Object.entries(writes)) {
        const body = await res.json();
        expect(res.status, `${what}: ${JSON.stringify(body)}`).toBe(503);
        expect(res.headers.get("retry-after"), what).toMatch(/^\d+$/);
        expect(body.error.code ?? body.error.type, what).toMatch(/storage_unavailable|overloaded_error/);
      }
      expect((await fetch(`${s.baseUrl}/v1/files/${file.id}`)).status).toBe(200);
      expect((await fetch(`${s.baseUrl}/v1/batches`)).status).toBe(200);
      s.child.kill("SIGTERM");
      expect(await s.exited).toBe(0);
      expect(logLines(s.output()).some((l) => /server lock/.test(l.msg) && l.level === 40)).toBe(true);
    } finally {
      s.child.kill("SIGKILL");
    }
  }, 120_000);

  it("full: a create refused with 507 leaves no batch folder; after a crash the server starts on the full disk, serving reads", async () => {
    let s = await disk.start();
    let filler = "";
    try {
      const file = await uploadJsonl(s.baseUrl, completionJsonl(200, { prefix: "full" }));
      filler = disk.fill(s);
      for (let i = 0; i < 3; i++) {
        const res = await createBatch(s.baseUrl, file.id);
        await new Promise((r) => setTimeout(r, 300));
        expect(res.status, `${await res.clone().text()}\n${s.output().slice(-4000)}`).toBe(507);
      }
      expect(readdirSync(disk.inside(s)).filter((n) => n.startsWith("batch_"))).toEqual([]);
      s.child.kill("SIGKILL");
      await s.exited;
      // The disk is still full at the next start: the server comes up to serve what it has, and says so.
      s = await disk.start();
      const readiness = await fetch(`${s.baseUrl}/ready`);
      expect(readiness.status).toBe(503);
      const ready = await readiness.json();
      expect(ready.storage).toMatchObject({ state: "full" });
      expect(ready.error).toMatchObject({ code: "storage_not_writable" });
      expect((await fetch(`${s.baseUrl}/v1/files/${file.id}`)).status).toBe(200);
      const refused = await upload(s.baseUrl, completionJsonl(1, { prefix: "y" }));
      expect(refused.status).toBe(507);
      expect(logLines(s.output()).filter((l) => /disk is full/.test(l.msg))).toHaveLength(1);
      // Space again: writes work without a restart.
      rmSync(disk.inside(s, "filler"), { force: true });
      filler = "";
      expect((await upload(s.baseUrl, completionJsonl(1, { prefix: "z" }))).status).toBe(200);
      expect((await createBatch(s.baseUrl, file.id)).status).toBe(200);
    } finally {
      if (filler && existsSync(filler)) rmSync(filler, { force: true });
      s.child.kill("SIGKILL");
    }
  }, 180_000);
});
