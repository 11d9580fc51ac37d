// The real server process under a low descriptor limit (ulimit -n 256) with silent clients trying to hold
// more sockets than it has descriptors: the connection cap (half the limit by default) keeps descriptors for
// the batch files, so a running batch persists its progress and completes while they hold on; the idle
// timeout then frees the server for everyone.
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { entryShell } from "../../testkit/entry.js";
import { completionJsonl } from "../../testkit/workload.js";
import { createBatch, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { spawnServer, untilListening } from "../helpers/process.js";
import { serverEnv } from "../helpers/server-testbed.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-fds-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("descriptors kept in reserve", () => {
  it("a running batch completes while silent clients try to take every descriptor", async () => {
    const env = { ...(await serverEnv(dir)), SEQUENCES: "2", HTTP_IDLE_TIMEOUT_SECONDS: "3", PIPELINE_BATCH_SIZE: "4" };
    const s = await untilListening(spawnServer("sh", ["-c", `ulimit -n 256 && exec ${entryShell("app/main.ts")}`], env), 60_000);
    const sockets: net.Socket[] = [];
    try {
      const base = s.baseUrl;
      const file = await uploadJsonl(base, completionJsonl(40, { prefix: "fd", maxTokens: 64 }));
      const created = await createBatch(base, file.id);
      expect(created.status).toBe(200);
      await pollBatch(base, created.body.id, (b) => b.status === "in_progress");
      // More silent sockets than the process has descriptors, held while the batch writes its results.
      for (let i = 0; i < 300; i++) {
        const socket = net.connect(Number(new URL(base).port), "127.0.0.1");
        socket.on("error", () => {});
        sockets.push(socket);
      }
      // The server drops what is over the cap at once and the rest at the idle timeout.
      await Promise.all(sockets.map((socket) => new Promise((r) => (socket.destroyed ? r(null) : socket.once("close", r)))));
      const done = await pollBatch(base, created.body.id, (b) => ["completed", "failed"].includes(b.status));
      expect(done.status).toBe("completed");
      expect(done.request_counts).toEqual({ completed: 40, failed: 0, total: 40 });
      expect(s.output()).not.toMatch(/EMFILE|cannot persist/);
    } finally {
      for (const socket of sockets) socket.destroy();
      s.child.kill("SIGTERM");
      await s.exited;
    }
  });
});
