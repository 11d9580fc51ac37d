// The real server process under a low descriptor limit (ulimit -n 128) with silent clients trying to hold
// more sockets than it has descriptors: the connection cap (half the limit by default) keeps descriptors for
// the batch files, so a running batch persists its progress and completes while they hold on; the idle
// timeout then frees the server for everyone.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { completionJsonl, createBatch, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { testModelPath } from "../helpers/model.js";
import { repoRoot } from "../helpers/process.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-fds-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("descriptors kept in reserve", () => {
  it("a running batch completes while silent clients try to take every descriptor", async () => {
    const main = path.join(repoRoot, "api/main.ts");
    const child = spawn("sh", ["-c", `ulimit -n 128 && exec "${process.execPath}" --import tsx "${main}"`], {
      cwd: repoRoot,
      env: {
        ...process.env,
        HOST: "127.0.0.1",
        PORT: "0",
        BATCH_DIR: dir,
        MODEL_PATH: await testModelPath(),
        GPU: "false",
        THREADS: "1",
        SEQUENCES: "2",
        CONTEXT_SIZE: "256",
        LOG_LEVEL: "info",
        HTTP_IDLE_TIMEOUT_SECONDS: "3",
        PIPELINE_BATCH_SIZE: "4",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
    const sockets: net.Socket[] = [];
    try {
      const deadline = Date.now() + 60_000;
      let port = 0;
      while (!port) {
        const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
        if (m) port = Number(m[1]);
        else if (Date.now() > deadline || child.exitCode !== null) throw new Error(`server did not start:\n${out}`);
        else await new Promise((r) => setTimeout(r, 50));
      }
      const base = `http://127.0.0.1:${port}`;
      const file = await uploadJsonl(base, completionJsonl(40, "fd", { maxTokens: 64 }));
      const created = await createBatch(base, file.id);
      expect(created.status).toBe(200);
      await pollBatch(base, created.body.id, (b) => b.status === "in_progress");
      // More silent sockets than the process has descriptors, held while the batch writes its results.
      for (let i = 0; i < 150; i++) {
        const s = net.connect(port, "127.0.0.1");
        s.on("error", () => {});
        sockets.push(s);
      }
      // The server drops what is over the cap at once and the rest at the idle timeout.
      await Promise.all(sockets.map((s) => new Promise((r) => (s.destroyed ? r(null) : s.once("close", r)))));
      const done = await pollBatch(base, created.body.id, (b) => ["completed", "failed"].includes(b.status));
      expect(done.status).toBe("completed");
      expect(done.request_counts).toEqual({ completed: 40, failed: 0, total: 40 });
      expect(out).not.toMatch(/EMFILE|cannot persist/);
    } finally {
      for (const s of sockets) s.destroy();
      child.kill("SIGTERM");
      await exited;
    }
  });
});
