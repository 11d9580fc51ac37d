// LMDB trusts its file: a page a power cut or a failing disk left torn ends the process that reads it (SIGSEGV,
// SIGBUS) rather than raising an error, and a cache must never be why a service cannot start. So a clean close stamps
// the data file's size and modification time, and an open removes the stamp. An environment found without its stamp
// (a kill, a crash, a power cut: no clean close since the last open), or whose file no longer matches it (written to
// while no process had it open), is read whole by a child process before this one opens it. One the child cannot
// read is removed, and the cache starts empty. After a clean stop the next start only compares the stamp (a write
// that keeps the size, within a few ms of the close, can keep the modification time too: the kernel's clock for file
// times is coarse).
import { spawnSync } from "node:child_process";
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, statSync, unlinkSync, writeSync } from "node:fs";
import path from "node:path";

/**
 * How every process opens the environment. overlappingSync off: a commit resolves once it is flushed to disk, so a
 * put that resolved is durable, and a write that fails (a full disk) rejects its own caller. With lmdb's default
 * overlapping sync a commit resolves before its flush, and the `flushed` promise follows the newest write's flush,
 * which lmdb (3.5.6, write.js) never resolves when that write fails: a batch's line waiting on it for its answer could
 * wait forever on a full disk. safeRestore: after a crash, the last transaction flushed to disk.
 */
export const LMDB_OPTIONS = { compression: false, overlappingSync: false, safeRestore: true } as const;
/** Written by a clean close (the data file's size and modification time then), removed by an open. */
const STAMP = "closed";
const DATA = "data.mdb";
/** Reading a whole cache takes seconds per gigabyte; a child stuck longer is taken as unreadable. */
const CHECK_TIMEOUT_MS = 10 * 60_000;

/** The child's exit code where it read the whole store but could not write its copy (a full disk). */
const NOT_COPIED = 3;

/**
 * Opens the environment read-only, reads every key and value of every table, then writes a compacted copy (only the
 * pages in use: a torn free page, which no read reaches but a later write would, is left behind).
 */
const READ_ALL = `
const { open } = await import(process.argv[1]);
const root = open({ path: process.argv[2], ...JSON.parse(process.argv[3]), readOnly: true, encoding: "binary" });
const names = [...root.getKeys()].filter((k) => typeof k === "string");
for (const db of [root, ...names.map((name) => root.openDB({ name, encoding: "binary" }))])
  for (const { value } of db.getRange({})) if (value === undefined) throw new Error("an entry without its value");
let copied = true;
try {
  (await import("node:fs")).mkdirSync(process.argv[4]);
  await root.backup(process.argv[4], true);
} catch (err) {
  // Only room or a read-only disk keeps the store as read; any other failure of the copy is a torn store's.
  if (!/ENOSPC|EDQUOT|EROFS|No space|quota|read-only/i.test(String(err?.code) + " " + err?.message)) throw err;
  copied = false;
}
await root.close();
process.exitCode = copied ? 0 : ${NOT_COPIED};
`;

/** The data file's size and modification time, or null where there is none. */
function stampOf(dir: string): string | null {
  try {
    const s = statSync(path.join(dir, DATA));
    return `${s.size}:${s.mtimeMs}`;
  } catch {
    return null;
  }
}

/** Whether the environment must be read whole before it is opened: not closed cleanly, or changed since. */
function suspect(dir: string): boolean {
  const now = stampOf(dir);
  if (now === null) return false;
  try {
    return readFileSync(path.join(dir, STAMP), "utf8").trim() !== now;
  } catch {
    return true;
  }
}

/**
 * Where `dir` holds an environment left open or changed since its clean close, a child reads it whole first; if it
 * cannot, the folder is removed. Returns why it was removed (for the log), else undefined.
 */
export function checkBeforeOpen(dir: string): string | undefined {
  if (!suspect(dir)) return undefined;
  const lmdb = import.meta.resolve("lmdb");
  // The child writes the copy into a folder of its own, as data.mdb.
  const copy = path.join(dir, "compact");
  rmSync(copy, { recursive: true, force: true });
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", READ_ALL, lmdb, dir, JSON.stringify(LMDB_OPTIONS), copy], {
    stdio: ["ignore", "ignore", "pipe"],
    timeout: CHECK_TIMEOUT_MS,
    encoding: "utf8",
  });
  if (child.status === 0) {
    // The compacted copy is the store from now on; the lock file goes with the old one.
    renameSync(path.join(copy, DATA), path.join(dir, DATA));
    rmSync(copy, { recursive: true, force: true });
    rmSync(path.join(dir, "lock.mdb"), { force: true });
    return undefined;
  }
  // Read whole, but no room for the copy: the store stays as it is (a full disk keeps its cache and its start).
  if (child.status === NOT_COPIED) {
    rmSync(copy, { recursive: true, force: true });
    return undefined;
  }
  rmSync(dir, { recursive: true, force: true });
  const error = child.stderr.split("\n").find((l) => /Error|MDB_/.test(l));
  const how = child.signal ? `reading it ended with ${child.signal}` : (error?.trim() ?? `its check exited ${child.status}`);
  return `the result cache at ${dir} could not be read (${how}): it was removed and starts empty`;
}

/** The environment is open in this process: its stamp goes (on disk, as a power cut would find it) until a clean close. */
export function markOpen(dir: string): void {
  try {
    unlinkSync(path.join(dir, STAMP));
  } catch {
    // None: a new environment, or one not closed cleanly.
  }
  syncPath(dir, "r");
}

/** A clean close: the data file's stamp written, on disk. */
export function unmarkOpen(dir: string): void {
  const stamp = stampOf(dir);
  // None: the folder was removed under it, and there is nothing to stamp.
  if (stamp === null) return;
  try {
    syncPath(path.join(dir, STAMP), "w", stamp);
    syncPath(dir, "r");
  } catch {
    // A disk that no longer takes writes keeps no stamp: the next start reads the store first.
  }
}

/** Flushes a file (written first when `text` is given) or a folder's entries to stable storage. */
function syncPath(target: string, flags: "r" | "w", text?: string): void {
  const fd = openSync(target, flags);
  try {
    if (text !== undefined) writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
