// The port every content store implements; only fs-blob-store.ts and s3-blob-store.ts know their layout.
import type { Readable } from "node:stream";

/**
 * File contents by key (`files/<id>.jsonl`, `<batch_id>/output.jsonl`): the port every content store implements
 * (the filesystem today; an object store such as S3 next). Keys are relative, `/`-separated, without `..`.
 */
export interface BlobStore {
  /** Stores a finished local file under `key`, moving it where it can (the local file is gone after). Returns its size. */
  putFile(key: string, localPath: string): Promise<number>;
  /**
   * Stores what `from` holds under `to` as well, without the bytes passing through this process (a link, a
   * server-side copy); returns its size, or undefined when `from` holds nothing.
   */
  copy(from: string, to: string): Promise<number | undefined>;
  /** Stores a stream's bytes under `key` (replacing what was there). Returns its size. */
  put(key: string, content: Readable): Promise<number>;
  /**
   * The content as a stream, with its size (of the range, when one is given: bytes `start` to `end`, end
   * exclusive); undefined when there is none.
   */
  open(key: string, range?: ByteRange): Promise<{ size: number; content: Readable } | undefined>;
  /** Bytes stored under `key`; undefined when there is none. */
  size(key: string): Promise<number | undefined>;
  /** Removes the content; absent content is not an error. */
  delete(key: string): Promise<void>;
  /** The keys under `prefix` (which ends with "/"), in no particular order. */
  list(prefix: string): Promise<string[]>;
  /** Removes every key under `prefix` (which ends with "/"); returns how many. */
  deletePrefix(prefix: string): Promise<number>;
  /** Resolves when the store answers and takes writes now (readiness); throws storage_unavailable when not. */
  ping(): Promise<void>;
}

/** The contents of `keys` in order, as one stream of chunks; `gone` says why a key holding nothing is a failure. */
export async function* concatenated(blobs: BlobStore, keys: readonly string[], gone: (key: string) => Error): AsyncGenerator<Buffer> {
  for (const key of keys) {
    const blob = await blobs.open(key);
    if (!blob) throw gone(key);
    for await (const chunk of blob.content) yield chunk as Buffer;
  }
}

export interface ByteRange {
  start: number;
  /** Exclusive. */
  end: number;
}
