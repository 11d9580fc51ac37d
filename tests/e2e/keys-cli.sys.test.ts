// `npm run keys` as a process: what it prints loads as the keys file the server reads, and a usage error is one
// line and exit 2, with no secret printed.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { loadKeys, sha256Hex } from "../../config/keys.js";
import { repoRoot } from "../../testkit/repo-root.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-keys-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function keys(...args: string[]) {
  return keysWith("", ...args);
}

/** The CLI with `input` on its standard input. */
async function keysWith(input: string, ...args: string[]) {
  try {
    const run = promisify(execFile)(process.execPath, ["--import", "tsx", path.join(repoRoot, "scripts/keys.ts"), ...args], {
      cwd: repoRoot,
    });
    run.child.stdin?.end(input);
    const { stdout, stderr } = await run;
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe("npm run keys", () => {
  it("prints a secret and an entry the keys file loads", async () => {
    const { code, stdout, stderr } = await keys("new", "labeling", "--admin", "--weight", "2", "--limit", "*=2000000");
    expect(code).toBe(0);
    const secret = stdout.trim();
    const file = path.join(dir, "keys.yaml");
    writeFileSync(file, `keys:\n${stderr.slice(stderr.indexOf("- id:"))}`);
    const [key] = loadKeys([], file);
    expect(key).toMatchObject({ id: "labeling", sha256: sha256Hex(secret), admin: true, weight: 2, limits: { "*": 2000000 } });
  });

  it.each([
    [["new", "analysts", "--limit", "star=abc"], "--limit 'star=abc': TOKENS must be a whole number"],
    [["new", "analysts", "--limit", "*=-5"], "--limit '*=-5': must be a whole number >= 1"],
    [["new", "--admn"], "unknown option '--admn' (did you mean --admin?)"],
    [["new", "--admn", "x"], "unknown option '--admn' (did you mean --admin?)"],
  ])("%j: one line naming it, exit 2, no secret", async (args, message) => {
    const { code, stdout, stderr } = await keys(...args);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr.trim().split("\n")).toEqual([expect.stringMatching(/^npm run keys: /)]);
    expect(stderr).toContain(`npm run keys: ${message} (usage: `);
  });

  it("hash prints a secret's sha256, and refuses an empty standard input (one line, exit 2)", async () => {
    expect((await keysWith("sk-made-elsewhere\n", "hash")).stdout).toBe(`${sha256Hex("sk-made-elsewhere")}\n`);
    const empty = await keysWith("\n", "hash");
    expect(empty.code).toBe(2);
    expect(empty.stdout).toBe("");
    expect(empty.stderr.trim()).toBe("npm run keys: hash: standard input holds no secret (npm run keys -- hash < secret-file)");
  });
});
