// What "stored" means on a local disk: the bytes and the name both on stable storage, so a power cut (or a disk
// that fails and is remounted) keeps what was acknowledged. A file's data is flushed before it is renamed into
// place; the folder holding the new name is flushed after.
import { open } from "node:fs/promises";
import path from "node:path";

/** Flushes a file's data (and its size) to stable storage. */
export async function syncFile(file: string): Promise<void> {
  const fh = await open(file, "r");
  try {
    await fh.datasync();
  } finally {
    await fh.close();
  }
}

/** Flushes a folder's entries (a name just created, renamed or removed in it). */
export async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } catch (err) {
    // Some file systems cannot flush a folder: there the rename is as durable as it gets.
    if (!["EINVAL", "ENOTSUP", "EISDIR"].includes((err as NodeJS.ErrnoException).code ?? "")) throw err;
  } finally {
    await fh.close();
  }
}

/** Flushes the folders that a recursive mkdir created (`first`, as mkdir returns it, down to `dir`): their names. */
export async function syncCreated(dir: string, first: string | undefined): Promise<void> {
  if (!first) return;
  for (let d = dir; ; d = path.dirname(d)) {
    await syncDir(path.dirname(d));
    if (d === first || path.dirname(d) === d) return;
  }
}
