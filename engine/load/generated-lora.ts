// A random LoRA adapter for a generated model (npm run gen-model -- --lora-for), so adapters are tested with no download.
import { randomUUID } from "node:crypto";
import { rename, unlink } from "node:fs/promises";
import { readGgufFileInfo } from "node-llama-cpp";
import { buildLoraAdapter } from "../gguf/lora-adapter.js";
import { writeGgufFile } from "../gguf/writer.js";

/** Writes an adapter for the model `basePath` to `file` (through a temporary sibling); returns its size in bytes. */
export async function writeGeneratedLora(basePath: string, file: string, seed = 1): Promise<number> {
  const base = await readGgufFileInfo(basePath, { readTensorInfo: true, logWarnings: false });
  const temp = `${file}.${process.pid}-${randomUUID().slice(0, 8)}.tmp`;
  try {
    const bytes = await writeGgufFile(temp, buildLoraAdapter(base, seed));
    await rename(temp, file);
    return bytes;
  } catch (err) {
    await unlink(temp).catch(() => {});
    throw err;
  }
}
