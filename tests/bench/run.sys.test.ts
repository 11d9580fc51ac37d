// `npm run bench` as a user types it: --help prints the options and exits 0 (it threw ERR_PARSE_ARGS_UNKNOWN_OPTION),
// and a typo exits 2 with one line saying what is wrong, before anything is measured.
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";

const bench = (...args: string[]) => spawnSync("npm", ["run", "--silent", "bench", "--", ...args], { cwd: repoRoot, encoding: "utf8" });

describe("npm run bench's command line", () => {
  it("prints its options for --help and exits 0", () => {
    const r = bench("--help");
    expect(r.stderr).not.toMatch(/ERR_PARSE_ARGS|at .*\.ts:\d+/);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^npm run bench \[-- options\]/);
    expect(r.stdout).toContain("--only <parts>");
  });

  it("refuses an unknown option in one line, exit code 2", () => {
    const r = bench("--quik");
    expect(r.status).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr.trim()).toBe("npm run bench: Unknown option '--quik'. npm run bench -- --help lists the options.");
  });
});
