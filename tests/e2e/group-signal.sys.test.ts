// `npm start` signalled as a terminal or `docker stop` of a shell wrapper signals it: the whole process
// group at once (npm, the shell and node each get the signal, and npm forwards its copy). One signal to the
// group must drain once and finish the shutdown, not count as two and exit at once.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";
import { logLines } from "../helpers/http-batches.js";
import { spawnServer, untilListening } from "../helpers/process.js";
import { serverEnv } from "../helpers/server-testbed.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-group-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a signal to npm start's whole process group", () => {
  it.each(["SIGTERM", "SIGINT"] as const)("%s drains once and completes the shutdown", async (signal) => {
    const env = await serverEnv(dir);
    // Its own process group, as a terminal's foreground job is.
    const s = await untilListening(spawnServer("npm", ["start", "--silent"], env, { detached: true }), 60_000);
    // npm itself may die of the signal; node's end is when the pipes it shares close.
    const closed = new Promise<void>((resolve) => s.child.on("close", () => resolve()));
    process.kill(-s.child.pid!, signal);
    await closed;
    const msgs = logLines(s.output()).map((l) => l.msg);
    expect(
      msgs.filter((m) => /^shutting down/.test(m)),
      s.output(),
    ).toHaveLength(1);
    expect(msgs, s.output()).not.toContain("second signal: exiting now");
    expect(msgs, s.output()).toContain("shutdown complete");
  });

  it("SIGTERM to npm's own pid, as a process manager sends it, reaches node: it drains and exits", async () => {
    const env = await serverEnv(dir);
    const s = await untilListening(spawnServer("npm", ["start", "--silent"], env, { detached: true }), 60_000);
    const closed = new Promise<void>((resolve) => s.child.on("close", () => resolve()));
    process.kill(s.child.pid!, "SIGTERM");
    // Node's end is when the pipes it shares close; before, npm's shell kept node listening after npm was gone.
    const ended = await Promise.race([closed.then(() => true), new Promise((r) => setTimeout(() => r(false), 20_000))]);
    if (!ended) process.kill(-s.child.pid!, "SIGKILL");
    expect(ended, s.output()).toBe(true);
    expect(logLines(s.output()).map((l) => l.msg)).toContain("shutdown complete");
  });

  it("SIGINT while the model loads, as Ctrl-C sends it: exit 130 at once, no failed binary, no fallback", async () => {
    const env = await serverEnv(dir);
    const s = spawnServer(
      process.execPath,
      ["--import", "tsx", path.join(repoRoot, "app/main.ts")],
      { ...env, GPU: "auto" },
      { detached: true },
    );
    // node-llama-cpp tests its binary in a child process as the load begins: the group's signal must not reach it.
    while (!/loading model/.test(s.output()) && s.child.exitCode === null) await new Promise((r) => setTimeout(r, 2));
    process.kill(-s.child.pid!, "SIGINT");
    expect(await s.exited, s.output()).toBe(130);
    expect(s.output()).not.toMatch(/\n\s+at |prebuilt binary|Binding binary test failed|falling back/);
    expect(logLines(s.output()).map((l) => l.msg)).toContain("stopped while starting: exiting");
  });
});
