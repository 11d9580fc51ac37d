// A store's objects read as the whole JSON lines they hold: results, errors and inputs, as the views and retries read them.
import { readCompleteJsonLines } from "../pipeline/jsonl.js";
import type { BlobStore } from "../stores/blob-store.js";

/** These objects' whole JSON lines, streamed from the store as they are read: no copy (a full disk, or twice the disk for every read). */
export async function* blobLines(blobs: BlobStore, keys: string[]): AsyncGenerator<string> {
  for (const key of keys) {
    const blob = await blobs.open(key);
    if (blob) yield* readCompleteJsonLines(blob.content);
  }
}
