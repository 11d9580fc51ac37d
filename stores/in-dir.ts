// Writes into a folder that almost always exists: the folder is made only when a write finds it missing, so the
// common case costs no mkdir and stat (a recursive mkdir of an existing folder is two system calls, and the
// state files, uploads and batch folders are written many times each).
import { constants } from "node:fs";
import { access, mkdir, rmdir } from "node:fs/promises";
import path from "node:path";
import { syncCreated } from "./durable.js";
import { storageUnavailable } from "./errors.js";

/**
 * Runs `write`; when it fails because a folder is missing (ENOENT), makes `dir` (its new names flushed to disk, so
 * what is written in it survives a power cut) and runs it once more.
 */
export async function inDir<T>(dir: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    try {
      await syncCreated(dir, await mkdir(dir, { recursive: true }));
    } catch (mkdirErr) {
      throw await mkdirFault(dir, mkdirErr);
    }
    return write();
  }
}

/**
 * What a failed mkdir means, found by asking the disk: on a file system that is read-only or full, Node's recursive
 * mkdir reports ENOENT (where a plain one says EROFS or ENOSPC), so its errno alone would make a storage fault look
 * like a bug. A plain mkdir of the folder tells the real errno; where its parent is missing too, the nearest folder
 * that exists is probed for writing, and a refusal there is the disk's fault.
 */
export async function mkdirFault(dir: string, err: unknown): Promise<unknown> {
  const plain = await mkdir(dir).then(
    () => rmdir(dir).then(() => err),
    (e: NodeJS.ErrnoException) => e,
  );
  if ((plain as NodeJS.ErrnoException).code !== "ENOENT")
    return plain === err || (plain as NodeJS.ErrnoException).code === "EEXIST" ? err : plain;
  let at = path.dirname(dir);
  for (;;) {
    try {
      await access(at, constants.F_OK);
      break;
    } catch {
      if (path.dirname(at) === at) return err;
      at = path.dirname(at);
    }
  }
  try {
    await access(at, constants.W_OK);
    return err;
  } catch (probe) {
    const code = (probe as NodeJS.ErrnoException).code;
    return code === "EROFS" || code === "EIO" || code === "EACCES" ? storageUnavailable(probe) : err;
  }
}
