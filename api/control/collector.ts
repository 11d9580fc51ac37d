// Housekeeping. A periodic sweep deletes files and batch folders past their expiry (a batch counts
// from the moment it ended, and only a final batch that nothing is still writing is ever touched);
// at start, what a crash left half-done is removed. Only names this service creates are looked at,
// since BATCH_DIR is often a shared directory such as /tmp.
import { existsSync } from "node:fs";
import { readdir, rm } from "node:fs/promises";
import path from "node:path";
import type pino from "pino";
import type { BatchStore } from "../stores/batch-store.js";
import type { DiskFileStore } from "../stores/file-store.js";
import { BATCH_ID_RE, FILE_ID_RE } from "../stores/ids.js";
import { uploadDir } from "../http/upload.js";
import { endedAt, isFinal } from "./batch-state.js";

export interface CollectorDeps {
  batchDir: string;
  files: DiskFileStore;
  store: BatchStore;
  /** How long a file, or a batch after it ended, is kept. */
  expirySeconds: number;
  /** True while a job may still write to the batch (running or being closed out). */
  busy: (batchId: string) => boolean;
  logger: pino.Logger;
  /** Unix seconds. */
  now: () => number;
}

export interface SweepResult {
  files: number;
  batches: number;
}

export class Collector {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<SweepResult> | undefined;

  constructor(private readonly deps: CollectorDeps) {}

  /** Sweeps now and then every `intervalSeconds`; the timer never keeps the process alive. */
  start(intervalSeconds: number): void {
    const tick = () => void this.sweep().catch((err) => this.deps.logger.error({ err }, "housekeeping sweep failed"));
    tick();
    this.timer = setInterval(tick, intervalSeconds * 1000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.sweeping?.catch(() => undefined);
  }

  /** One pass; a pass already under way is joined rather than run twice. */
  sweep(now = this.deps.now()): Promise<SweepResult> {
    this.sweeping ??= this.collect(now).finally(() => (this.sweeping = undefined));
    return this.sweeping;
  }

  private async collect(now: number): Promise<SweepResult> {
    const { files, store, expirySeconds, busy, logger } = this.deps;
    const result: SweepResult = { files: 0, batches: 0 };
    for (const rec of store.all()) {
      const b = rec.batch;
      if (!isFinal(b.status) || busy(b.id) || (endedAt(b) ?? b.created_at) + expirySeconds > now) continue;
      const dir = store.paths(b.id).dir;
      // The batch's own files (results, an inline input) go with it: their records first, so no
      // record is ever left pointing into a deleted folder.
      for (const f of files.entries()) if (isInside(f.path, dir) && (await files.remove(f.object.id))) result.files++;
      await store.remove(b.id);
      result.batches++;
    }
    const busyDirs = store
      .all()
      .filter((rec) => busy(rec.batch.id))
      .map((rec) => store.paths(rec.batch.id).dir);
    for (const f of files.entries()) {
      const expiresAt = f.object.expires_at;
      if (typeof expiresAt !== "number" || expiresAt > now) continue;
      // A batch still running reads its inline input: that file waits for the next sweep.
      if (busyDirs.some((dir) => isInside(f.path, dir))) continue;
      // An expired file's bytes go too, a batch's result file included (output_expires_after).
      if (await files.remove(f.object.id, { content: true })) {
        result.files++;
        await store.forgetFile(f.object.id);
      }
    }
    if (result.files + result.batches > 0)
      logger.info({ ...result, expiry_seconds: expirySeconds }, "housekeeping: deleted expired files and batches");
    return result;
  }
}

const isInside = (file: string, dir: string) => file.startsWith(dir + path.sep);

/**
 * Start-up cleanup of what a crash can leave behind, run before anything is served: temp files of
 * atomic writes (*.tmp), partial uploads, upload content whose metadata was never written (or was
 * deleted first), and batch folders whose creation never reached batch.json (no client was told of them).
 */
export async function removeCrashLeftovers(deps: Pick<CollectorDeps, "batchDir" | "files" | "logger">): Promise<number> {
  const { batchDir, files, logger } = deps;
  const removed: string[] = [];
  const remove = async (p: string) => {
    await rm(p, { recursive: true, force: true });
    removed.push(path.relative(batchDir, p));
  };

  for (const e of await readdir(batchDir, { withFileTypes: true })) {
    if (!e.isDirectory() || !BATCH_ID_RE.test(e.name)) continue;
    const dir = path.join(batchDir, e.name);
    const names = await readdir(dir);
    if (!names.includes("batch.json")) await remove(dir);
    else for (const n of names) if (n.endsWith(".tmp")) await remove(path.join(dir, n));
  }

  // A file recorded for a batch whose creation never finished (an inline batch's input, killed between the
  // record and batch.json) points into a folder just removed: the record goes too, so no listed file is 404.
  for (const f of files.entries()) {
    if (existsSync(f.path)) continue;
    await files.remove(f.object.id);
    removed.push(`files/${f.object.id}.json`);
  }

  const filesDir = path.join(batchDir, "files");
  const known = new Set(files.entries().map((f) => f.object.id));
  for (const n of await readdir(filesDir).catch(() => [] as string[])) {
    const content = /^(.+)\.jsonl$/.exec(n);
    if (n.endsWith(".tmp") || (content && FILE_ID_RE.test(content[1]) && !known.has(content[1]))) await remove(path.join(filesDir, n));
  }
  for (const n of await readdir(uploadDir(batchDir)).catch(() => [] as string[])) await remove(path.join(uploadDir(batchDir), n));

  if (removed.length > 0)
    logger.warn({ count: removed.length, removed: removed.slice(0, 20) }, "removed what an earlier crash left half-written");
  return removed.length;
}
