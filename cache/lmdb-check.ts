// LMDB trusts its file: a page a power cut or a failing disk left torn ends the process that reads it (SIGSEGV,
// SIGBUS) rather than raising an error, and a cache must never be why a service cannot start. So a process marks the
// environment while it has it open; an environment found still marked was not closed (a kill, a crash, a power cut),
// and is read whole by a child process before this one opens it. One the child cannot read is removed, and the
// cache starts empty. A clean stop costs nothing at the next start.
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, fsyncSync, openSync, rmSync, unlinkSync, writeSync } from "node:fs";
import path from "node:path";

/** How every process opens the environment. safeRestore: after a crash, the last transaction flushed to disk, not the
 * last committed (lmdb's overlapping sync trusts the latter while the OS's boot id is unchanged, and a disk that
 * failed without a reboot then hands back pages never written). */
export const LMDB_OPTIONS = { compression: false, safeRestore: true } as const;
const MARKER = "in-use";
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

/**
 * Where `dir` holds an environment a process did not close, a child reads it whole first; if it cannot, the folder
 * is removed. Returns why it was removed (for the log), else undefined.
 */
export function checkAfterUncleanStop(dir: string): string | undefined {
  if (!existsSync(path.join(dir, MARKER))) return undefined;
  const lmdb = import.meta.resolve("lmdb");
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", READ_ALL, lmdb, dir, JSON.stringify(LMDB_OPTIONS)], {
    stdio: ["ignore", "ignore", "pipe"],
    timeout: CHECK_TIMEOUT_MS,
    encoding: "utf8",
  });
  if (child.status === 0) return undefined;
  rmSync(dir, { recursive: true, force: true });
  const how = child.signal ? `ended by ${child.signal}` : (child.stderr.trim().split("\n").at(-1) ?? `exit ${child.status}`);
  return `the result cache at ${dir} was left unreadable by an unclean stop (${how}): it starts empty`;
}

/** The environment is open in this process: a stop that does not reach unmarkOpen leaves it marked. On disk before
 * the first write, as a power cut would find it. */
export function markOpen(dir: string): void {
  for (const [file, flags] of [
    [path.join(dir, MARKER), "w"],
    [dir, "r"],
  ] as const) {
    const fd = openSync(file, flags);
    try {
      if (flags === "w") writeSync(fd, `${process.pid}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
}

export function unmarkOpen(dir: string): void {
  try {
    unlinkSync(path.join(dir, MARKER));
  } catch {
    // Already gone (the folder removed under it): nothing to say.
  }
}
