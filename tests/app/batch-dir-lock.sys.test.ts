import { spawn } from "node:child_process";
import { mkdtempSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { BatchDirInUseError, lockBatchDir } from "../../app/batch-dir-lock.js";

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(path.join(os.tmpdir(), "obi-lock-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("BATCH_DIR lock", () => {
  it("refuses a directory held by another live process and names its pid", async () => {
    const dir = tmp();
    const other = spawn(process.execPath, ["-e", "setTimeout(() => {}, 10000)"]);
    try {
      writeFileSync(path.join(dir, ".server.lock"), String(other.pid));
      expect(() => lockBatchDir(dir)).toThrow(BatchDirInUseError);
      expect(() => lockBatchDir(dir)).toThrow(new RegExp(`pid ${other.pid}`));
    } finally {
      other.kill("SIGKILL");
    }
  });

  it("takes over a lock left by a dead process, and releases it", async () => {
    const dir = tmp();
    const dead = spawn(process.execPath, ["-e", ""]);
    await new Promise((r) => dead.on("exit", r));
    writeFileSync(path.join(dir, ".server.lock"), String(dead.pid));
    const release = lockBatchDir(dir);
    expect(readlinkSync(path.join(dir, ".server.lock"))).toBe(String(process.pid));
    release();
    const again = lockBatchDir(dir);
    again();
  });

  it("reads a lock as a link to the holder's pid, so a second server on the folder is refused", async () => {
    const dir = tmp();
    const other = spawn(process.execPath, ["-e", "setTimeout(() => {}, 10000)"]);
    try {
      symlinkSync(String(other.pid), path.join(dir, ".server.lock"));
      expect(() => lockBatchDir(dir)).toThrow(new RegExp(`pid ${other.pid}`));
    } finally {
      other.kill("SIGKILL");
    }
  });
});
