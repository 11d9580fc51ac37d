// What both file stores of the distributed mode share: the File object a record starts as, and an upload's way in
// (content first, then its record, so a record always has content; a failed record takes its content back out).

import { newFileId } from "../domain/ids.js";
import type { FileObject } from "../domain/objects.js";
import type { NewFile } from "../domain/ports.js";
import type { BlobStore } from "../stores/blob-store.js";

export type NewFileRecord = NewFile & { id: string; key: string; size: number };

/** What both file stores need besides their records: the contents' store, the default expiry and a clock. */
export interface FileStoreDeps {
  blobs: BlobStore;
  expirySeconds: number;
  /** Unix seconds. */
  now: () => number;
}

export function newFileObject(input: NewFileRecord, created: number, expirySeconds: number): FileObject {
  return {
    id: input.id,
    object: "file",
    bytes: input.size,
    created_at: created,
    filename: input.filename,
    purpose: input.purpose,
    status: "processed",
    expires_at: created + (input.expiresAfter?.seconds ?? expirySeconds),
  };
}

export async function adoptUpload(
  blobs: BlobStore,
  input: NewFile & { tmpPath: string },
  record: (r: NewFileRecord) => Promise<FileObject>,
): Promise<FileObject> {
  const id = newFileId();
  const key = `files/${id}.jsonl`;
  const size = await blobs.putFile(key, input.tmpPath);
  try {
    return await record({ ...input, id, key, size });
  } catch (err) {
    await blobs.delete(key).catch(() => undefined);
    throw err;
  }
}
