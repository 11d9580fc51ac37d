// `npm start` signalled as a terminal or `docker stop` of a shell wrapper signals it: the whole process
// group at once (npm, the shell and node each get the signal, and npm forwards its copy). One signal to the
// group must drain once and exit 0, not count as two and exit at once.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { logLines } from "../helpers/http-batches.js";
import { testModelPath } from "../helpers/model.js";
import { repoRoot } from "../helpers/process.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-group-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a signal to npm start's whole process group", () => {
  it.each(["SIGTERM", "SIGINT"] as const)("%s drains once and completes the shutdown", async (signal) => {
    const child = spawn("npm", ["start", "--silent"], {
      cwd: repoRoot,
      // Its own process group, as a terminal's foreground job is.
      detached: true,
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
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    // npm itself may die of the signal; node's end is when the pipes it shares close.
    const closed = new Promise<void>((resolve) => child.on("close", () => resolve()));
    const deadline = Date.now() + 60_000;
    while (!/listening on http/.test(out)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`server did not start:\n${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    process.kill(-child.pid!, signal);
    await closed;
    const msgs = logLines(out).map((l) => l.msg);
    expect(msgs.filter((m) => /^shutting down/.test(m))).toHaveLength(1);
    expect(msgs).toContain("shutdown complete");
    expect(msgs).not.toContain("second signal: exiting now");
  });
});
