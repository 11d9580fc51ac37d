// Each process's scratch space (BATCH_DIR/scratch/<process>) and the sweep of those whose process is gone: a
// killed process leaves its folder, and with the default name (host-pid) every restart makes a new one. A live
// process touches its folder's `.alive` every few seconds; a folder untouched for `staleSeconds` belongs to no
// live process (on this host, or any host sharing the folder) and is removed.
import { mkdir, readdir, rm, stat, statfs, utimes, writeFile } from "node:fs/promises";
import path from "node:path";
import type pino from "pino";
import { exhaustedErrno, isStorageFault, StorageUnavailableError } from "./errors.js";
import { mkdirFault } from "./in-dir.js";

/** What the disk under BATCH_DIR lets this process do: `full` and `read_only` serve reads only, until it heals. */
export type StorageState = "ok" | "full" | "read_only";

const ALIVE = ".alive";
/** Below this much free space the disk counts as full: what a paused batch waits for before it goes on. */
export const FREE_FLOOR_BYTES = 1024 * 1024;
/** How often a disk found full or read-only is looked at again, so /ready turns back soon after it heals. */
const RECHECK_MS = 2_000;

export class ScratchSpace {
  private timer: NodeJS.Timeout | undefined;
  private recheck: NodeJS.Timeout | undefined;
  /**
   * The disk as the last upkeep or the last failed write found it: a process on a full disk serves reads until
   * space is freed. The heartbeat alone cannot see a full disk (touching a file needs no space), so the upkeep also
   * asks the file system for free space, and every write that meets ENOSPC or EROFS says so through `noteFault`.
   */
  state: StorageState = "ok";

  constructor(
    private readonly deps: {
      /** BATCH_DIR/scratch: every process's folder is in it. */
      root: string;
      /** This process's folder, inside `root`. */
      own: string;
      staleSeconds: number;
      logger: pino.Logger;
      now?: () => number;
    },
  ) {}

  async start(): Promise<void> {
    this.timer = setInterval(() => void this.upkeep(false), Math.max(1_000, (this.deps.staleSeconds * 1000) / 4));
    this.timer.unref();
    await this.upkeep(true).catch((err) => {
      clearInterval(this.timer);
      clearInterval(this.recheck);
      throw err;
    });
  }

  /** A write failed: a full or read-only disk turns the state at once (true), until an upkeep finds it healed. */
  noteFault(err: unknown): boolean {
    const fault = faultOf(err);
    if (fault) this.enter(fault, err);
    return fault !== undefined;
  }

  /** Touches and sweeps; a disk that is full or read-only is said once, not fatal, and tried again next time. */
  private async upkeep(starting: boolean): Promise<void> {
    try {
      await this.touch();
      await this.sweep();
      if (!(await this.hasSpace())) return this.enter("full", undefined);
      if (this.state !== "ok") this.deps.logger.warn({ was: this.state }, "the disk takes writes again: the service is whole");
      this.state = "ok";
      clearInterval(this.recheck);
      this.recheck = undefined;
    } catch (err) {
      const fault = faultOf(err);
      if (fault) return this.enter(fault, err);
      if (starting) throw err;
      this.deps.logger.warn({ err }, "scratch space upkeep failed");
    }
  }

  private enter(fault: Exclude<StorageState, "ok">, err: unknown): void {
    if (this.state !== fault)
      this.deps.logger.error(
        { err, batchDir: path.dirname(this.deps.root) },
        fault === "full"
          ? "the disk is full: serving reads only, writes answer 507 until space is freed"
          : "the disk refuses writes: serving reads only, writes answer 503 until it takes them again",
      );
    this.state = fault;
    if (!this.recheck && this.timer) {
      this.recheck = setInterval(() => void this.upkeep(false), RECHECK_MS);
      this.recheck.unref();
    }
  }

  /** Whether the file system under the scratch space has room (true when it cannot say: the next write tells). */
  private async hasSpace(): Promise<boolean> {
    const fs = await statfs(this.deps.root).catch(() => undefined);
    return !fs || (fs.bavail * fs.bsize >= FREE_FLOOR_BYTES && fs.ffree !== 0);
  }

  /** Removes the folders of processes not heard from within `staleSeconds`; returns their names. */
  async sweep(): Promise<string[]> {
    const { root, own, staleSeconds, logger } = this.deps;
    const now = this.deps.now?.() ?? Date.now();
    const removed: string[] = [];
    for (const e of await readdir(root, { withFileTypes: true }).catch(() => [])) {
      const dir = path.join(root, e.name);
      if (!e.isDirectory() || dir === path.resolve(own)) continue;
      // A folder from before the heartbeat file existed is judged by its own time.
      const seen = (
        await stat(path.join(dir, ALIVE))
          .catch(() => stat(dir))
          .catch(() => undefined)
      )?.mtimeMs;
      if (seen === undefined || now - seen < staleSeconds * 1000) continue;
      await rm(dir, { recursive: true, force: true });
      removed.push(e.name);
    }
    if (removed.length > 0) logger.info({ removed }, "removed the scratch space of processes that are gone");
    return removed;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.recheck);
    // Nothing in it outlives the process: what was committed is in the blob store.
    await rm(this.deps.own, { recursive: true, force: true }).catch(() => undefined);
  }

  private async touch(): Promise<void> {
    const file = path.join(this.deps.own, ALIVE);
    const t = new Date(this.deps.now?.() ?? Date.now());
    await utimes(file, t, t).catch(async () => {
      await mkdir(this.deps.own, { recursive: true }).catch(async (err) => {
        throw await mkdirFault(this.deps.own, err);
      });
      await writeFile(file, "");
    });
  }
}

/** What a failed write says of the local disk; an unreachable object store (no errno behind it) says nothing. */
function faultOf(err: unknown): Exclude<StorageState, "ok"> | undefined {
  const errno = exhaustedErrno(err);
  if (errno === "ENOSPC" || errno === "EDQUOT") return "full";
  if (isStorageFault(err)) return "read_only";
  return err instanceof StorageUnavailableError && err.cause !== undefined ? faultOf(err.cause) : undefined;
}
