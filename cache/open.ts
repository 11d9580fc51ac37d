// The embedded result cache as the settings ask for it: LMDB in BATCH_DIR/cache/, bounded by RESULT_CACHE_MAX_BYTES
// (by default a twentieth of the size of BATCH_DIR's disk, at most 20 GiB) and RESULT_CACHE_TTL.
import { statfs } from "node:fs/promises";
import path from "node:path";
import { LmdbResultCache } from "./lmdb-cache.js";

/** The default bound's share of the disk, and its ceiling: the cache never crowds out the batches' own files. */
export const DEFAULT_DISK_SHARE = 1 / 20;
export const DEFAULT_MAX_BYTES_CEILING = 20 * 1024 ** 3;

export interface ResultCacheSettings {
  maxBytes: number;
  ttlSeconds: number;
}

/** RESULT_CACHE_MAX_BYTES, or the default from the size of the disk `dir` is on. */
export async function cacheBound(dir: string, maxBytes: number): Promise<number> {
  if (maxBytes > 0) return maxBytes;
  const fs = await statfs(dir).catch(() => undefined);
  const disk = fs ? fs.blocks * fs.bsize : DEFAULT_MAX_BYTES_CEILING / DEFAULT_DISK_SHARE;
  return Math.max(1 << 20, Math.min(DEFAULT_MAX_BYTES_CEILING, Math.floor(disk * DEFAULT_DISK_SHARE)));
}

/** Where model files' digests are remembered (cache/model-identity.ts), beside the embedded store. */
export const digestsFile = (batchDir: string) => path.join(batchDir, "cache", "model-digests.json");

/** The embedded store and the sidecar of model digests beside it, under BATCH_DIR/cache/. */
export async function openEmbeddedCache(batchDir: string, settings: ResultCacheSettings) {
  const dir = path.join(batchDir, "cache");
  const maxBytes = await cacheBound(batchDir, settings.maxBytes);
  const cache = new LmdbResultCache(path.join(dir, "answers"), { maxBytes, ttlSeconds: settings.ttlSeconds });
  return { cache, sidecar: digestsFile(batchDir), maxBytes, damaged: cache.damaged };
}
