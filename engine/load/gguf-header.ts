// A GGUF file's header as node-llama-cpp reads it, read once per version of the file while a start needs it. One
// model's start asks for it four times (the memory budget's footprint, the engine's, the file's check, and the
// adapters' checks and footprints), and node-llama-cpp parses the whole vocabulary each time: about 0.3 s of the main
// thread for a vocabulary of 150,000 tokens, 35 ms for a small one.
import { stat } from "node:fs/promises";
import path from "node:path";
import type { GgufFileInfo } from "node-llama-cpp";

/**
 * How long a header is kept once read: a start's reads fall within it. A large vocabulary's header holds tens of MB
 * of strings, so it is not kept for good; a read after this reads the file again.
 */
export const HEADER_KEPT_MS = 30_000;

/** Which file a split model's header comes from: its parts spliced (the model), or the part named alone (a download's check). */
export type HeaderParts = "spliced" | "this";

const SPLIT_PART = /-\d{5}-of-\d{5}\.gguf$/i;

const kept = new Map<string, Promise<GgufFileInfo>>();

/**
 * The file's header, with its tensors; shared between callers, so read only. A file changed under the same path
 * (another size, modification time or inode) is read anew; a read that fails is not kept.
 */
export async function readGgufHeader(file: string, parts: HeaderParts = "spliced"): Promise<GgufFileInfo> {
  const s = await stat(file);
  // Only a split model's first part reads differently spliced; any other file reads the same either way.
  const splice = parts === "spliced" && SPLIT_PART.test(file);
  const key = `${path.resolve(file)}\u0000${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${splice}`;
  const found = kept.get(key);
  if (found) return found;
  const read = import("node-llama-cpp").then(({ readGgufFileInfo }) =>
    readGgufFileInfo(file, { readTensorInfo: true, logWarnings: false, spliceSplitFiles: splice }),
  );
  kept.set(key, read);
  const forget = () => {
    if (kept.get(key) === read) kept.delete(key);
  };
  read.then(() => setTimeout(forget, HEADER_KEPT_MS).unref(), forget);
  return read;
}
