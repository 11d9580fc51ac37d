// The real server process on a small tmpfs of its own (a mount namespace made by `unshare`, so no root and
// nothing left mounted): the disk fills while a batch runs. The batch pauses with what it wrote, uploads and
// creates answer 507 storage_full, and once space is freed the batch goes on and completes every request once.
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { until } from "../../testkit/batch-client.js";
import { entryShell } from "../../testkit/entry.js";
import { completionJsonl } from "../../testkit/workload.js";
import { createBatch, getBatch, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { canMountTmpfs, onPrivateTmpfs } from "../helpers/private-tmpfs.js";
import { spawnServer, untilListening } from "../helpers/process.js";
import { serverEnv } from "../helpers/server-testbed.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-full-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const canMount = canMountTmpfs(dir, "disk-full.test");

const N = 200;

describe.skipIf(!canMount)("a full disk, through the real process on a small tmpfs", () => {
  it("pauses a running batch, answers 507 to uploads and creates, and goes on once space is freed", async () => {
    const mount = onPrivateTmpfs(dir, "8m", entryShell("app/main.ts"));
    const s = await untilListening(spawnServer("unshare", mount, await serverEnv(dir)), 60_000);
    // The tmpfs as the server sees it: its mount namespace, reached through its root.
    const inside = (...p: string[]) => path.join(`/proc/${s.child.pid}/root`, dir, ...p);
    const filler = inside("filler");
    try {
      const base = s.baseUrl;
      const file = await uploadJsonl(base, completionJsonl(N, { prefix: "full", maxTokens: 48 }));
      const created = await createBatch(base, file.id);
      const id = created.body.id;
      await pollBatch(base, id, (b) => b.request_counts.completed >= 3);

      fillDisk(filler);
      await waitForLog(s.output, /the batch is paused/);
      const paused = await getBatch(base, id);
      expect(paused.status).toBe("in_progress");
      expect(paused.request_counts.completed).toBeLessThan(N);

      const upload = await fetch(`${base}/v1/files`, { method: "POST", body: uploadForm("x".repeat(2000)) });
      expect(upload.status).toBe(507);
      expect(upload.headers.get("retry-after")).toMatch(/^\d+$/);
      expect((await upload.json()).error).toMatchObject({ type: "server_error", code: "storage_full" });
      // Five creates and an inline one at (almost) no bytes free: each refused, and none leaves a batch or a file
      // behind (a client that retries as told gets no duplicates).
      for (let i = 0; i < 5; i++) {
        const refused = await createBatch(base, file.id);
        expect(refused.status).toBe(507);
        expect(refused.body.error.code).toBe("storage_full");
      }
      const inline = await fetch(`${base}/v1/batches`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ input: [{ prompt: "Once upon a time" }, { prompt: "The dog" }], max_tokens: 4 }),
      });
      expect(inline.status).toBe(507);
      const listed = async (what: string) =>
        ((await (await fetch(`${base}/v1/${what}?limit=100`)).json()) as any).data.map((x: any) => x.id);
      expect(await listed("batches")).toEqual([id]);
      expect(await listed("files")).toEqual([file.id]);
      // The results so far stream from the files themselves: no scratch copy, so a full disk does not cut them off.
      const results = await fetch(`${base}/v1/batches/${id}/results`);
      expect(results.status).toBe(200);
      const sofar = ((await results.json()) as any).data as Array<{ custom_id: string }>;
      expect(sofar.length).toBeGreaterThanOrEqual(3);
      expect(new Set(sofar.map((l) => l.custom_id)).size).toBe(sofar.length);

      // Still paused a few seconds on: nothing failed, nothing is shown that the disk does not have.
      await new Promise((r) => setTimeout(r, 3000));
      const still = await getBatch(base, id);
      expect(still.status).toBe("in_progress");
      expect(still.request_counts.failed).toBe(0);

      rmSync(filler);
      const done = await pollBatch(base, id, (b) => ["completed", "failed", "expired"].includes(b.status), 120_000);
      expect(done.status).toBe("completed");
      expect(done.request_counts).toEqual({ completed: N, failed: 0, total: N });
      const lines = readFileSync(inside(id, "output.jsonl"), "utf8")
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(lines).toHaveLength(N);
      expect(new Set(lines.map((l) => l.custom_id)).size).toBe(N);
      expect(JSON.parse(readFileSync(inside(id, "batch.json"), "utf8")).batch.status).toBe("completed");
      expect(s.output()).toMatch(/disk space is back/);
      expect(await listed("batches")).toEqual([id]);
    } finally {
      s.child.kill("SIGTERM");
      await s.exited;
    }
  }, 180_000);
});

/** Appends to `file` until the filesystem refuses, in ever smaller pieces, so hardly a byte is left. */
function fillDisk(file: string) {
  for (const size of [1 << 20, 1 << 16, 1 << 12, 1 << 8]) {
    try {
      for (;;) appendFileSync(file, Buffer.alloc(size));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
    }
  }
}

function uploadForm(content: string) {
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([content]), "x.jsonl");
  return form;
}

const waitForLog = (output: () => string, re: RegExp, timeoutMs = 60_000) =>
  until(`a log line matching ${re}`, () => (re.test(output()) ? true : undefined), {
    timeoutMs,
    seen: () => output().slice(-3000),
  });
