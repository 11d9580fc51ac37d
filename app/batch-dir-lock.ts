// One server per BATCH_DIR: two workers resuming the same batches would run requests twice. The lock is a symbolic
// link whose target is the holder's pid: made in one step (it exists whole or not at all), and kept in the inode
// itself on ext4 and most file systems, so a server can take it on a disk with no free block left and start to
// serve reads. A lock file holding the pid, as earlier versions wrote, is read the same way.
import { mkdirSync, readFileSync, readlinkSync, rmSync, symlinkSync } from "node:fs";
import path from "node:path";

export class BatchDirInUseError extends Error {
  constructor(dir: string, pid: number) {
    super(`BATCH_DIR ${dir} is in use by another server (pid ${pid}); stop it or choose another BATCH_DIR`);
    this.name = "BatchDirInUseError";
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Takes BATCH_DIR/.server.lock (pid inside); a lock left by a dead process is taken over. Returns the release,
 * which never throws: a lock it cannot remove (a disk gone read-only) is reported to `onReleaseError` and taken over
 * by the next start, since its process is gone by then.
 */
export function lockBatchDir(dir: string, onReleaseError: (err: unknown, file: string) => void = () => {}): () => void {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, ".server.lock");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      symlinkSync(String(process.pid), file);
      return () => {
        try {
          rmSync(file, { force: true });
        } catch (err) {
          onReleaseError(err, file);
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const pid = holder(file);
      if (Number.isInteger(pid) && pid !== process.pid && alive(pid)) throw new BatchDirInUseError(dir, pid);
      rmSync(file, { force: true });
    }
  }
  throw new Error(`cannot take the lock ${file}`);
}

/** The pid a lock names: its link's target, or an earlier version's file content; NaN when it names none. */
function holder(file: string): number {
  try {
    return Number.parseInt(readlinkSync(file), 10);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EINVAL") throw err;
    return Number.parseInt(readFileSync(file, "utf8"), 10);
  }
}
