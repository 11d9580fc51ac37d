// A power cut under the real server process: BATCH_DIR on an ext4 file system of its own (a loop device mounted
// in a private mount namespace), shut down mid-batch with EXT4_IOC_SHUTDOWN and no log flush, as xfstests' godown
// does: whatever was not flushed to stable storage is lost, the disk answers EIO from then on. The process is then
// killed, the file system checked and mounted again under a new process. Everything acknowledged survives: the
// uploads' contents, a completed batch's output, and a running batch's counted lines; the rest runs again, each
// custom_id once. Needs root (mount, losetup) and e2fsprogs: skipped with a note elsewhere.
import { execFileSync, spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkBatch, describeVerdict } from "../../chaos/checker.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { createBatch, getBatch, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { loopDisk } from "../helpers/loop-disk.js";

const disk = loopDisk("power", 96);
const { work, image } = disk;
const skip = disk.skip;
if (skip) console.warn(`power-cut.test: skipped, ${skip}`);
afterAll(() => disk.remove());

/** EXT4_IOC_SHUTDOWN (_IOR('X', 125, __u32)) with EXT4_GOING_FLAGS_NOLOGFLUSH: no data or journal flushed. */
const GODOWN = `import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.ioctl(fd, 0x8004587D, struct.pack("I", 2))`;

const start = () => disk.start();

async function results(base: string, b: any): Promise<{ output: any[]; errors: any[] }> {
  const read = async (id: string | null) =>
    id
      ? (await (await fetch(`${base}/v1/files/${id}/content`)).text())
          .split("\n")
          .filter((l) => l.trim())
          .map((l) => JSON.parse(l))
      : [];
  return { output: await read(b.output_file_id), errors: await read(b.error_file_id) };
}

describe.skipIf(skip !== undefined)("a power cut mid-batch, through the real process", () => {
  it("keeps every acknowledged upload and counted line; the rest runs again once", async () => {
    let s = await start();
    const content = completionJsonl(300, { prefix: "pc", maxTokens: 48 });
    const small = completionJsonl(20, { prefix: "ok", maxTokens: 4 });
    let done: any;
    let running: string;
    let fileId: string;
    try {
      const base = s.baseUrl;
      const file = await uploadJsonl(base, content);
      fileId = file.id;
      const first = await createBatch(base, (await uploadJsonl(base, small)).id);
      done = await pollBatch(base, first.body.id, (b) => b.status === "completed", 60_000);
      running = (await createBatch(base, file.id)).body.id;
      await pollBatch(base, running, (b) => b.request_counts.completed >= 20, 60_000);
      // The cut: the file system stops, nothing more reaches the disk.
      writeFileSync(path.join(work, "godown.py"), GODOWN);
      execFileSync("python3", [path.join(work, "godown.py"), disk.inside(s)]);
      // A disk that fails its writes is the storage's fault, said as such: 503 storage_unavailable, never a 500.
      const form = new FormData();
      form.append("purpose", "batch");
      form.append("file", new Blob([small]), "x.jsonl");
      const refused = await fetch(`${base}/v1/files`, { method: "POST", body: form });
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as any).error.code).toBe("storage_unavailable");
      const ready = await fetch(`${base}/ready`);
      expect(ready.status).toBe(503);
    } finally {
      s.child.kill("SIGKILL");
      await s.exited;
    }
    // Its mount namespace went with the process; the file system is checked as after a real crash.
    await new Promise((r) => setTimeout(r, 500));
    spawnSync("e2fsck", ["-fy", image], { stdio: "ignore" });
    s = await start();
    try {
      const base = s.baseUrl;
      const upload = await fetch(`${base}/v1/files/${fileId!}/content`);
      expect(upload.status).toBe(200);
      expect(await upload.text()).toBe(content);
      const finished = await getBatch(base, done.id);
      expect(finished.status).toBe("completed");
      const a = await results(base, finished);
      const va = checkBatch(finished, customIds("ok", 20), a.output, a.errors);
      expect(va, describeVerdict(va)).toEqual({ batch: done.id, lost: 0, duplicated: 0, mismatches: [] });
      const resumed = await pollBatch(base, running!, (b) => ["completed", "failed", "expired"].includes(b.status), 150_000);
      expect(resumed.status).toBe("completed");
      const b = await results(base, resumed);
      const vb = checkBatch(resumed, customIds("pc", 300), b.output, b.errors);
      expect(vb, describeVerdict(vb)).toEqual({ batch: running!, lost: 0, duplicated: 0, mismatches: [] });
    } finally {
      s.child.kill("SIGTERM");
      await s.exited;
    }
  }, 300_000);
});
