// BATCH_DIR on an ext4 file system of its own: a loop-mounted image in the server's private mount namespace, so a
// test can fill it, remount it read-only or cut its power under the real process. Needs root and e2fsprogs;
// `skip` says why not where they are missing.
import { execFileSync, spawnSync } from "node:child_process";
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { entryShell } from "../../testkit/entry.js";
import { type ServerProcess, spawnServer, untilListening } from "./process.js";
import { serverEnv } from "./server-testbed.js";

export interface LoopDisk {
  /** The mount point, as the server sees it (BATCH_DIR). */
  dir: string;
  work: string;
  image: string;
  /** Why this machine cannot make one; undefined where it can. */
  skip: string | undefined;
  /** Starts the server with BATCH_DIR on the image, mounted afresh in its own namespace. */
  start(env?: Record<string, string>): Promise<ServerProcess>;
  /** A path inside the server's mount namespace. */
  inside(s: ServerProcess, ...p: string[]): string;
  /** Remounts the file system read-only (or back) under the running server. */
  remount(s: ServerProcess, mode: "ro" | "rw"): void;
  /** Fills the file system to its last byte; returns the filler's path, to remove to free the space. */
  fill(s: ServerProcess): string;
  remove(): void;
}

export function loopDisk(name: string, sizeMb = 64): LoopDisk {
  const work = mkdtempSync(path.join(os.tmpdir(), `obi-${name}-`));
  const image = path.join(work, "disk.ext4");
  const dir = path.join(work, "mnt");
  let skip: string | undefined;
  try {
    execFileSync("mkdir", ["-p", dir]);
    execFileSync("truncate", ["-s", `${sizeMb}M`, image]);
    execFileSync("mkfs.ext4", ["-q", "-F", image], { stdio: "ignore" });
    const probe = spawnSync("unshare", ["-m", "sh", "-c", `mount -o loop "${image}" "${dir}" && umount "${dir}"`], { encoding: "utf8" });
    if (probe.status !== 0) skip = `cannot loop-mount an ext4 image in a mount namespace (${probe.stderr.trim()}): needs root`;
  } catch (err) {
    skip = `mkfs.ext4 failed (${(err as Error).message})`;
  }
  const inside = (s: ServerProcess, ...p: string[]) => path.join(`/proc/${s.child.pid}/root`, dir, ...p);
  return {
    dir,
    work,
    image,
    skip,
    async start(env = {}) {
      const cmd = `mount -o loop "${image}" "${dir}" && exec ${entryShell("app/main.ts")}`;
      return untilListening(spawnServer("unshare", ["-m", "sh", "-c", cmd], { ...(await serverEnv(dir)), SEQUENCES: "2", ...env }), 60_000);
    },
    inside,
    remount(s, mode) {
      execFileSync("nsenter", ["-t", String(s.child.pid), "-m", "mount", "-o", `remount,${mode}`, dir]);
    },
    fill(s) {
      const filler = inside(s, "filler");
      for (const size of [1 << 20, 1 << 16, 1 << 12, 1 << 8, 1])
        try {
          for (;;) appendFileSync(filler, Buffer.alloc(size));
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
        }
      return filler;
    },
    remove() {
      rmSync(work, { recursive: true, force: true });
    },
  };
}
