// Writes into a folder that almost always exists: the folder is made only when a write finds it missing, so the
// common case costs no mkdir and stat (a recursive mkdir of an existing folder is two system calls, and the
// state files, uploads and batch folders are written many times each).
import { mkdir } from "node:fs/promises";
import { syncCreated } from "./durable.js";

/**
 * Runs `write`; when it fails because a folder is missing (ENOENT), makes `dir` (its new names flushed to disk, so
 * what is written in it survives a power cut) and runs it once more.
 */
export async function inDir<T>(dir: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    await syncCreated(dir, await mkdir(dir, { recursive: true }));
    return write();
  }
}
