// Each process's scratch space (BATCH_DIR/scratch/<process>) and the sweep of those whose process is gone: a
// killed process leaves its folder, and with the default name (host-pid) every restart makes a new one. A live
// process touches its folder's `.alive` every few seconds; a folder untouched for `staleSeconds` belongs to no
// live process (on this host, or any host sharing the folder) and is removed.
import { mkdir, readdir, rm, stat, utimes, writeFile } from "node:fs/promises";
import path from "node:path";
import type pino from "pino";
import { exhaustedErrno, isStorageFault, StorageUnavailableError } from "../stores/errors.js";
import { classified } from "../stores/in-dir.js";

/** What the disk under BATCH_DIR lets this process do: `full` and `read_only` serve reads only, until it heals. */
export type StorageState = "ok" | "full" | "read_only";

const ALIVE = ".alive";

export class ScratchSpace {
  private timer: NodeJS.Timeout | undefined;
  /** The disk as the last upkeep found it: a process that starts on a full disk serves reads until space is freed. */
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
    await this.upkeep(true);
    this.timer = setInterval(() => void this.upkeep(false), Math.max(1_000, (this.deps.staleSeconds * 1000) / 4));
    this.timer.unref();
  }

  /** Touches and sweeps; a disk that is full or read-only is said once, not fatal, and tried again next time. */
  private async upkeep(starting: boolean): Promise<void> {
    try {
      await this.touch();
      await this.sweep();
      if (this.state !== "ok") this.deps.logger.warn({ was: this.state }, "the disk takes writes again: the service is whole");
      this.state = "ok";
    } catch (err) {
      const fault = exhaustedErrno(err) ? "full" : isStorageFault(err) || err instanceof StorageUnavailableError ? "read_only" : undefined;
      if (!fault) {
        if (starting) throw err;
        this.deps.logger.warn({ err }, "scratch space upkeep failed");
        return;
      }
      if (this.state !== fault)
        this.deps.logger.error(
          { err, batchDir: path.dirname(this.deps.root) },
          fault === "full"
            ? "the disk is full: serving reads only, writes answer 507 until space is freed"
            : "the disk refuses writes: serving reads only, writes answer 503 until it takes them again",
        );
      this.state = fault;
    }
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
    // Nothing in it outlives the process: what was committed is in the blob store.
    await rm(this.deps.own, { recursive: true, force: true }).catch(() => undefined);
  }

  private async touch(): Promise<void> {
    const file = path.join(this.deps.own, ALIVE);
    const t = new Date(this.deps.now?.() ?? Date.now());
    await utimes(file, t, t).catch(async () => {
      await mkdir(this.deps.own, { recursive: true }).catch(async (err) => {
        throw await classified(this.deps.own, err);
      });
      await writeFile(file, "");
    });
  }
}
