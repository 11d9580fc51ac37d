// `npm start` as a user runs it: config errors, the curl demo script, SIGTERM.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { testModelPath } from "../../testkit/model.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { spawnMain, startMain } from "../helpers/process.js";

const run = promisify(execFile);
const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(path.join(os.tmpdir(), "obi-main-"));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("the server process", () => {
  it("fails at start with one clear message on invalid configuration", async () => {
    const p = spawnMain({ PORT: "not-a-port", BATCH_DIR: tempDir() });
    expect(await p.exited).toBe(1);
    expect(p.output()).toMatch(/invalid configuration: PORT=not-a-port: must be a whole number >= 0/);
    expect(p.output().trim().split("\n")).toHaveLength(1);
  });

  it("fails clearly when MODEL_PATH does not exist", async () => {
    const p = spawnMain({ MODEL_PATH: "/nonexistent/model.gguf", BATCH_DIR: tempDir() });
    expect(await p.exited).toBe(1);
    expect(p.output()).toMatch(/model\.gguf/);
  });

  it("serves the curl demo scripts and exits 0 on SIGTERM", async () => {
    const dir = tempDir();
    const server = await startMain({ BATCH_DIR: dir, MODEL_PATH: await testModelPath(), THREADS: "1" });
    try {
      const env = { ...process.env, BASE_URL: server.baseUrl, OUT_DIR: dir, POLL_SECONDS: "0.2", TIMEOUT_SECONDS: "60" };
      const inline = await run("bash", [path.join(repoRoot, "examples/submit_and_poll.sh"), "--inline"], { env });
      expect(inline.stdout).toMatch(/status=completed/);
      const file = await run("bash", [path.join(repoRoot, "examples/submit_and_poll.sh")], { env });
      expect(file.stdout).toMatch(/uploaded .*sample_batch\.jsonl/);
      expect(file.stdout).toMatch(/results: .*_output\.jsonl \(4 lines\)/);
      // With no server there, its own message and nothing else: no stack trace from the JSON reader.
      const down = await run("bash", [path.join(repoRoot, "examples/submit_and_poll.sh")], {
        env: { ...env, BASE_URL: "http://127.0.0.1:1" },
      }).catch((err: { stdout: string; stderr: string; code: number }) => err);
      expect(down.stderr).toMatch(/error: cannot reach http:\/\/127\.0\.0\.1:1/);
      expect(down.stderr).not.toMatch(/SyntaxError|at JSON\.parse/);
      // No keys: loopback only, and the warning says how to open it.
      expect(server.output()).toMatch(
        /API_KEYS is not set: the API has no keys, so it listens on 127\.0\.0\.1 only;.*HOST=0\.0\.0\.0 to open it without keys/,
      );
      // A second server on the same BATCH_DIR would run the same batches twice: it must refuse to start.
      const twin = spawnMain({ BATCH_DIR: dir, MODEL_PATH: await testModelPath(), PORT: "0", HOST: "127.0.0.1" });
      expect(await twin.exited).toBe(1);
      expect(twin.output()).toMatch(/in use by another server \(pid \d+\)/);
    } finally {
      server.child.kill("SIGTERM");
    }
    expect(await server.exited).toBe(0);
    expect(server.output()).toMatch(/shutdown complete/);
  });

  it("serves the generated model with a loud warning when MODEL_PATH is unset", async () => {
    const server = await startMain({ BATCH_DIR: tempDir(), MODEL_PATH: "", THREADS: "1" });
    try {
      expect(server.output()).toMatch(/RANDOM weights/);
      const ready = await (await fetch(`${server.baseUrl}/ready`)).json();
      expect(JSON.stringify(ready)).toMatch(/generated/i);
    } finally {
      server.child.kill("SIGTERM");
    }
    expect(await server.exited).toBe(0);
  });
});
