// LMDB trusts its file: a page a power cut or a failing disk left torn ends the process that reads it (SIGSEGV,
// SIGBUS) rather than raising an error, and a cache must never be why a service cannot start. So a process marks the
// environment while it has it open, and a clean close stamps its data file's size and modification time. An
// environment found still marked (a kill, a crash, a power cut), or whose file no longer matches its stamp (written
// to while no process had it open), is read whole by a child process before this one opens it. One the child cannot
// read is removed, and the cache starts empty. After a clean stop the next start only compares the stamp.
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, rmSync, statSync, unlinkSync, writeSync } from "node:fs";
import path from "node:path";

/** How every process opens the environment. safeRestore: after a crash, the last transaction flushed to disk, not the
 * last committed (lmdb's overlapping sync trusts the latter while the OS's boot id is unchanged, and a disk that
 * failed without a reboot then hands back pages never written). */
export const LMDB_OPTIONS = { compression: false, safeRestore: true } as const;
const MARKER = "in-use";
/** Written by a clean close: the data file's size and modification time then. */
const STAMP = "closed";
const DATA = "data.mdb";
/** Reading a whole cache takes seconds per gigabyte; a child stuck longer is taken as unreadable. */
const CHECK_TIMEOUT_MS = 10 * 60_000;

/** Opens the environment read-only and reads every key and value of every table. */
const READ_ALL = `
const { open } = await import(process.argv[1]);
const root = open({ path: process.argv[2], ...JSON.parse(process.argv[3]), readOnly: true, encoding: "binary" });
const names = [...root.getKeys()].filter((k) => typeof k === "string");
for (const db of [root, ...names.map((name) => root.openDB({ name, encoding: "binary" }))])
  for (const { value } of db.getRange({})) if (value === undefined) throw new Error("an entry without its value");
await root.close();
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

/** Whether the environment must be read whole before it is opened: left open, or changed since its clean close. */
function suspect(dir: string): boolean {
  if (existsSync(path.join(dir, MARKER))) return true;
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
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", READ_ALL, lmdb, dir, JSON.stringify(LMDB_OPTIONS)], {
    stdio: ["ignore", "ignore", "pipe"],
    timeout: CHECK_TIMEOUT_MS,
    encoding: "utf8",
  });
  if (child.status === 0) return undefined;
  rmSync(dir, { recursive: true, force: true });
  const error = child.stderr.split("\n").find((l) => /Error|MDB_/.test(l));
  const how = child.signal ? `reading it ended with ${child.signal}` : (error?.trim() ?? `its check exited ${child.status}`);
  return `the result cache at ${dir} could not be read (${how}): it was removed and starts empty`;
}

/** The environment is open in this process: a stop that does not reach unmarkOpen leaves it marked. */
export function markOpen(dir: string): void {
  writeDurably(path.join(dir, MARKER), `${process.pid}\n`);
}

/** A small file written and synced with its folder, as a power cut would find it. */
function writeDurably(file: string, text: string): void {
  for (const [target, flags] of [
    [file, "w"],
    [path.dirname(file), "r"],
  ] as const) {
    const fd = openSync(target, flags);
    try {
      if (flags === "w") writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
}

/** A clean close: the data file's stamp written (and on disk), then the mark removed. */
export function unmarkOpen(dir: string): void {
  try {
    const stamp = stampOf(dir);
    if (stamp !== null) writeDurably(path.join(dir, STAMP), stamp);
    unlinkSync(path.join(dir, MARKER));
  } catch {
    // Already gone (the folder removed under it): nothing to say.
  }
}
