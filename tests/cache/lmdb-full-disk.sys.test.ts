// The embedded result cache on a disk that fills: every put settles, stored or refused, and none waits forever. A
// batch's line waits for its answer's put (ExecuteOptions.waitForStore), so a put that never settled would hold its
// line, and the batch would never reach the write that pauses it.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { entryShell } from "../../testkit/entry.js";
import { canMountTmpfs, onPrivateTmpfs } from "../helpers/private-tmpfs.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-cache-full-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const canMount = canMountTmpfs(dir, "lmdb-full-disk.test");

describe.skipIf(!canMount)("the embedded result cache on a disk that fills", () => {
  it("settles every put, stored or refused, and stores some before the disk is full", () => {
    const child = `${entryShell("tests/cache/full-disk-puts.ts")} "${dir}/cache"`;
    const run = spawnSync("unshare", onPrivateTmpfs(dir, "2m", child), {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const { stored, refused, pending } = JSON.parse(run.stdout.trim().split("\n").at(-1) ?? "");
    expect(pending).toBe(0);
    expect(stored).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    expect(stored + refused).toBe(320);
  }, 90_000);
});
