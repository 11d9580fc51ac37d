// What the examples write where a user runs them stays out of git: examples/submit_and_poll.sh writes each batch's
// results as batch_<id>_output.jsonl (and _errors.jsonl) into OUT_DIR, the current folder by default.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";

const exec = promisify(execFile);

it.skipIf(!existsSync(path.join(repoRoot, ".git")))(
  "ignores the result files examples/submit_and_poll.sh writes into the folder it runs in",
  async () => {
    const names = ["batch_6a1f0c2e9b7d4e3f8a5b1c0d_output.jsonl", "batch_6a1f0c2e9b7d4e3f8a5b1c0d_errors.jsonl"];
    const paths = names.flatMap((n) => [n, `examples/${n}`]);
    const { stdout } = await exec("git", ["check-ignore", "--no-index", ...paths], { cwd: repoRoot });
    expect(stdout.trim().split("\n").sort()).toEqual([...paths].sort());
  },
);
