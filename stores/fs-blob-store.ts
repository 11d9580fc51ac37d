// The BlobStore port on a local folder (BATCH_DIR): a key is a path below it. Content moves in by rename (or a
// copy across file systems), goes out as a read stream. `localPath` is this store's own extra: a shard run in
// place (one machine's batches) appends its results to the files themselves through it.
import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { copyFile, link, mkdir, readdir, rename, rm, rmdir, stat, statfs, writeFile } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { checkBlobKey, prefixKey } from "./blob-key.js";
import type { BlobStore, ByteRange } from "./blob-store.js";
import { syncCreated, syncDir, syncFile } from "./durable.js";
import { isStorageFull, storageUnavailable } from "./errors.js";
import { inDir } from "./in-dir.js";

export class FsBlobStore implements BlobStore {
  constructor(readonly root: string) {}

  /** The file holding `key`'s bytes. Throws on a key that would leave the root. */
  localPath(key: string): string {
    return path.join(this.root, checkBlobKey(key));
  }

  /**
   * Whether at least `minBytes` (and an inode) are free where the contents live. When the filesystem cannot say
   * (a quota, say), true: the next write tells.
   */
  async hasFreeSpace(minBytes: number): Promise<boolean> {
    try {
      const fs = await statfs(this.root);
      return fs.bavail * fs.bsize >= minBytes && fs.ffree !== 0;
    } catch {
      return true;
    }
  }

  /**
   * The folder takes writes: a file is made and removed (a disk remounted read-only, or one failing with I/O
   * errors, refuses). A full disk is not unready: it serves everything but new content, and says so (507).
   */
  async ping(): Promise<void> {
    const probe = path.join(this.root, `.ready-${process.pid}`);
    try {
      await writeFile(probe, "");
      await rm(probe, { force: true });
    } catch (err) {
      if (isStorageFull(err)) return;
      throw storageUnavailable(err);
    }
  }

  /** The key of a file below the root (one a batch wrote in its folder). */
  keyOf(localPath: string): string {
    const key = path.relative(this.root, path.resolve(localPath)).split(path.sep).join("/");
    this.localPath(key);
    return key;
  }

  /** Durable when it returns: the bytes flushed before the rename, the new name after (an upload is acknowledged on it). */
  async putFile(key: string, localPath: string): Promise<number> {
    const dest = this.localPath(key);
    await syncFile(localPath);
    try {
      await inDir(path.dirname(dest), () => rename(localPath, dest));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EXDEV") throw err;
      await inDir(path.dirname(dest), () => copyFile(localPath, dest));
      await syncFile(dest);
      await rm(localPath, { force: true });
    }
    await syncDir(path.dirname(dest));
    return (await stat(dest)).size;
  }

  async copy(from: string, to: string): Promise<number | undefined> {
    const size = await this.size(from);
    if (size === undefined) return undefined;
    const dest = this.localPath(to);
    // Contents are never changed in place, so a second name for the same bytes is a copy; beside the target
    // first, then renamed, as every write here is.
    const tmp = `${dest}.${process.pid}.${randomUUID()}.tmp`;
    try {
      await inDir(path.dirname(dest), () => link(this.localPath(from), tmp));
    } catch (err) {
      if (!["EXDEV", "EPERM", "ENOTSUP", "EMLINK"].includes((err as NodeJS.ErrnoException).code ?? "")) throw err;
      await copyFile(this.localPath(from), tmp);
      await syncFile(tmp);
    }
    await rename(tmp, dest);
    await syncDir(path.dirname(dest));
    return size;
  }

  async put(key: string, content: Readable): Promise<number> {
    const dest = this.localPath(key);
    await syncCreated(path.dirname(dest), await mkdir(path.dirname(dest), { recursive: true }));
    // Written aside and renamed, so a reader never sees half of it; flushed before and after the rename.
    const tmp = `${dest}.${process.pid}.${randomUUID()}.tmp`;
    try {
      await pipeline(content, createWriteStream(tmp));
      await syncFile(tmp);
      await rename(tmp, dest);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    await syncDir(path.dirname(dest));
    return (await stat(dest)).size;
  }

  async open(key: string, range?: ByteRange): Promise<{ size: number; content: Readable } | undefined> {
    const size = await this.size(key);
    if (size === undefined) return undefined;
    if (!range) return { size, content: createReadStream(this.localPath(key)) };
    const end = Math.min(range.end, size);
    const start = Math.min(range.start, end);
    // createReadStream's `end` is inclusive; an empty range still needs a stream that ends at once.
    const content = end > start ? createReadStream(this.localPath(key), { start, end: end - 1 }) : Readable.from([]);
    return { size: end - start, content };
  }

  async size(key: string): Promise<number | undefined> {
    const info = await stat(this.localPath(key)).catch(() => undefined);
    return info?.isFile() ? info.size : undefined;
  }

  async delete(key: string): Promise<void> {
    await rm(this.localPath(key), { force: true });
  }

  async list(prefix: string): Promise<string[]> {
    const key = prefixKey(prefix);
    const files = await readdir(this.localPath(key), { recursive: true, withFileTypes: true }).catch(() => []);
    return files
      .filter((f) => f.isFile())
      .map((f) => path.relative(this.root, path.join(f.parentPath, f.name)).split(path.sep).join("/"))
      .filter((k) => !k.split("/").some((part) => part.startsWith(".")));
  }

  async deletePrefix(prefix: string): Promise<number> {
    const dir = this.localPath(prefixKey(prefix));
    const files = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
    await rm(dir, { recursive: true, force: true });
    return files.filter((f) => f.isFile()).length;
  }
}

/** Removes `dir` and its parents while they are empty, up to (not including) `root`. */
export async function pruneEmpty(dir: string, root: string): Promise<void> {
  for (let d = dir; d !== root && d.startsWith(root + path.sep); d = path.dirname(d)) {
    // rmdir refuses a folder that is not empty: that is where pruning stops.
    if (
      !(await rmdir(d).then(
        () => true,
        () => false,
      ))
    )
      return;
  }
}

/** Where uploads stream to before the store adopts them: inside the folder, so adopting is a rename. */
export function uploadDir(root: string): string {
  return path.join(root, "files", ".uploads");
}
