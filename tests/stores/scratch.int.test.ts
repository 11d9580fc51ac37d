// The scratch space of processes that are gone: swept by any process sharing the folder once untouched for a
// while (its heartbeat file, or the folder's own time where it has none); a live process's is kept; a process
// removes its own as it closes. Directly, and through the real service starting over a folder a killed one left.
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ScratchSpace } from "../../stores/scratch.js";
import { startTestService } from "../helpers/service.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A process's folder under `root`, last heard from `agoSeconds` ago (through `.alive`, or the folder's time). */
function folder(root: string, name: string, agoSeconds: number, heartbeat = true): string {
  const dir = path.join(root, name);
  mkdirSync(path.join(dir, "batch_x-0-1"), { recursive: true });
  writeFileSync(path.join(dir, "batch_x-0-1", "output.jsonl"), "{}\n");
  const t = new Date(Date.now() - agoSeconds * 1000);
  if (heartbeat) {
    writeFileSync(path.join(dir, ".alive"), "");
    utimesSync(path.join(dir, ".alive"), t, t);
  }
  utimesSync(dir, t, t);
  return dir;
}

describe("scratch space", () => {
  it("removes the folders of processes not heard from within staleSeconds, keeps the live ones and its own", async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), "obi-scratch-"));
    dirs.push(root);
    folder(root, "dead-host-1", 600);
    folder(root, "legacy-host-2", 600, false);
    folder(root, "live-host-3", 5);
    const own = path.join(root, "me");
    const space = new ScratchSpace({ root, own, staleSeconds: 120, logger: pino({ level: "silent" }) });
    await space.start();
    expect(["dead-host-1", "legacy-host-2", "live-host-3", "me"].map((n) => existsSync(path.join(root, n)))).toEqual([
      false,
      false,
      true,
      true,
    ]);
    expect(existsSync(path.join(own, ".alive"))).toBe(true);
    // A second process sharing the folder keeps this one while it beats.
    const other = new ScratchSpace({ root, own: path.join(root, "other"), staleSeconds: 120, logger: pino({ level: "silent" }) });
    await other.start();
    expect(existsSync(own)).toBe(true);
    await space.close();
    await other.close();
    expect(existsSync(own)).toBe(false);
  });

  it("a service starting over a BATCH_DIR that a killed process left sweeps its scratch folder", async () => {
    const batchDir = mkdtempSync(path.join(os.tmpdir(), "obi-scratch-svc-"));
    dirs.push(batchDir);
    const stale = folder(path.join(batchDir, "scratch"), "vm-4242", 3_600, false);
    const svc = await startTestService({ BATCH_DIR: batchDir });
    try {
      expect(existsSync(stale)).toBe(false);
    } finally {
      await svc.close();
    }
    // Its own went with it.
    expect(existsSync(path.join(batchDir, "scratch"))).toBe(true);
    expect(existsSync(path.join(batchDir, "scratch", "vm-4242"))).toBe(false);
  });
});
