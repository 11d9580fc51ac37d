// A key's bound on the bytes its stored files hold together (the keys file's file_storage_limit_bytes): an upload
// that would pass it is refused as OpenAI refuses an organization past its file storage, and a file deleted or
// expired gives its bytes back, since what counts is the files the key has now.
import type { ApiKey } from "../../config/keys.js";
import { storageQuotaExceeded } from "../../domain/errors.js";
import type { FileStore } from "../../domain/ports.js";
import { MAX_FILES_PAGE } from "../schemas/requests.js";

/** The bytes of every file `key` has stored (its uploads and its batches' outputs alike). */
async function storedBytes(files: FileStore, key: ApiKey): Promise<number> {
  let total = 0;
  let after: string | undefined;
  for (;;) {
    const page = await files.list({ after, limit: MAX_FILES_PAGE, order: "asc", owner: key.owner });
    for (const f of page.data) total += f.bytes;
    if (!page.has_more || page.data.length === 0) return total;
    after = page.data[page.data.length - 1].id;
  }
}

/** Each key's uploads being checked and stored in this process: one at a time, so two cannot share the room left. */
const pending = new Map<string, Promise<unknown>>();

/**
 * Runs `store` (an upload of `adding` bytes kept) once `key`'s files leave room for it, after this process's other
 * uploads by the same key; throws storage_quota_exceeded otherwise. No key (an open API): no bound.
 */
export async function withinStorage<T>(files: FileStore, key: ApiKey | undefined, adding: number, store: () => Promise<T>): Promise<T> {
  if (!key) return store();
  const before = pending.get(key.owner) ?? Promise.resolve();
  const run = before
    .catch(() => undefined)
    .then(async () => {
      const used = await storedBytes(files, key);
      if (used + adding > key.fileStorageBytes) throw storageQuotaExceeded(key.fileStorageBytes, used, adding);
      return store();
    });
  pending.set(key.owner, run);
  try {
    return await run;
  } finally {
    if (pending.get(key.owner) === run) pending.delete(key.owner);
  }
}
