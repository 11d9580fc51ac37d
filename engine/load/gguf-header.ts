// A GGUF file's header as node-llama-cpp reads it, read once per version of the file while a start needs it. One
// model's start asked for it three times besides node-llama-cpp's own load (the memory budget's footprint, the
// engine's, the file's check; an adapter's check and footprint too), and node-llama-cpp parses the whole vocabulary
// each time: about 0.3 s of the main thread for a vocabulary of 150,000 tokens, 35 ms for a small one.
import { stat } from "node:fs/promises";
import path from "node:path";
import type { GgufFileInfo } from "node-llama-cpp";
import { SPLIT_PART } from "./model-source.js";

/**
 * How long a header is kept once read: a start's reads fall within it. A large vocabulary's header holds tens of MB
 * of strings, so it is not kept for good; a read after this reads the file again.
 */
export const HEADER_KEPT_MS = 30_000;

/**
 * Which files a split model's header is read from: all its parts, spliced (the model as llama.cpp loads it), or the
 * part named alone (a check of that file against its own size, which needs none of the others).
 */
export type HeaderParts = "spliced" | "this";

const kept = new Map<string, Promise<GgufFileInfo>>();

/**
 * The file's header, with its tensors; shared between callers, so read only. A file changed under the same path
 * (another size, modification time or inode) is read anew; a read that fails is not kept. A split model's spliced
 * header is never kept: it depends on every part, and the key knows one.
 */
export async function readGgufHeader(file: string, parts: HeaderParts = "spliced"): Promise<GgufFileInfo> {
  const s = await stat(file);
  // Any other file reads the same either way.
  const splice = parts === "spliced" && SPLIT_PART.test(file);
  const key = `${path.resolve(file)}\u0000${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}`;
  const found = splice ? undefined : kept.get(key);
  if (found) return found;
  // Imported here, not with the file: the downloader's check and the start page that reports it load before the
  // engine (app/starting.ts), and a model served from its engine's record never loads node-llama-cpp.
  const read = import("node-llama-cpp").then(({ readGgufFileInfo }) =>
    readGgufFileInfo(file, { readTensorInfo: true, logWarnings: false, spliceSplitFiles: splice }),
  );
  if (splice) return read;
  kept.set(key, read);
  const forget = () => {
    if (kept.get(key) === read) kept.delete(key);
  };
  read.then(() => setTimeout(forget, HEADER_KEPT_MS).unref(), forget);
  return read;
}
