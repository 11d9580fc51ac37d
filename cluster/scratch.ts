// Each process's scratch space (BATCH_DIR/scratch/<process>) and the sweep of those whose process is gone: a
// killed process leaves its folder, and with the default name (host-pid) every restart makes a new one. A live
// process touches its folder's `.alive` every few seconds; a folder untouched for `staleSeconds` belongs to no
// live process (on this host, or any host sharing the folder) and is removed.
import { mkdir, readdir, rm, stat, utimes, writeFile } from "node:fs/promises";
import path from "node:path";
import type pino from "pino";

const ALIVE = ".alive";

export class ScratchSpace {
  private timer: NodeJS.Timeout | undefined;

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
    await mkdir(this.deps.own, { recursive: true });
    await this.touch();
    await this.sweep();
    this.timer = setInterval(
      () =>
        void this.touch()
          .then(() => this.sweep())
          .catch((err) => this.deps.logger.warn({ err }, "scratch space upkeep failed")),
      Math.max(1_000, (this.deps.staleSeconds * 1000) / 4),
    );
    this.timer.unref();
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
      await mkdir(this.deps.own, { recursive: true });
      await writeFile(file, "");
    });
  }
}
