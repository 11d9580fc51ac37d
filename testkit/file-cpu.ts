// Each test file's CPU, which the timing reporter sums per tier and ranks: on 2 cores the suite's wall time follows
// the CPU its files use, not the time each spends waiting (on a lease, a process, a poll). Counted from before the
// file is imported to its last hook: its worker's (the engine's threads included) and, on Linux, that of the
// processes it started and waited for (servers, runners). PostgreSQL, which pg_ctl starts apart, is not counted.
import { readFileSync } from "node:fs";
import { afterAll } from "vitest";

declare module "vitest" {
  interface TaskMeta {
    /** The file's CPU in ms (testkit/file-cpu.ts). */
    cpuMs?: number;
  }
}

/** This process's CPU and its waited-for children's, in ms. */
export function cpuMs(): number {
  const own = process.cpuUsage();
  return (own.user + own.system) / 1000 + childrenMs(readStat());
}

/**
 * The CPU of a process's waited-for children, in ms, from its /proc/<pid>/stat: after the command's closing
 * parenthesis come stat(5)'s fields from the third, and cutime and cstime are the 16th and 17th, in clock ticks
 * (100 a second on Linux). Nothing where there is no such file.
 */
export function childrenMs(stat: string | undefined): number {
  const fields = stat?.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ms = fields ? (Number(fields[13]) + Number(fields[14])) * 10 : 0;
  return Number.isFinite(ms) ? ms : 0;
}

function readStat(): string | undefined {
  try {
    return readFileSync("/proc/self/stat", "utf8");
  } catch {
    return undefined;
  }
}

const begun = cpuMs();
// vitest reads a hook's first parameter as fixtures to set up, which it wants destructured: none here.
// biome-ignore lint/correctness/noEmptyPattern: see above
afterAll(({}, file) => {
  file.meta.cpuMs = Math.round(cpuMs() - begun);
});
