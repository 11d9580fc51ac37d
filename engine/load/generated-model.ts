// The project's own random-weights model: written once per preset/seed/content version into a
// cache directory, so the service and tests run on a machine that has no model at all.
import { createHash, randomUUID } from "node:crypto";
import { mkdir, rename, unlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { buildLlamaModel, GENERATOR_VERSION } from "../gguf/llama-model.js";
import { DEFAULT_PRESET, getPreset, type ModelPreset, PRESET_NAMES, type PresetName } from "../gguf/presets.js";
import { encodeHeader, writeGgufFile } from "../gguf/writer.js";
import { isFile } from "./files.js";

export { DEFAULT_PRESET, PRESET_NAMES as GENERATED_MODEL_PRESETS, type PresetName };

export const DEFAULT_SEED = 1;

export interface GeneratedModelOptions {
  /** Cache directory; default defaultGeneratedModelDir(). */
  dir?: string;
  /** One of GENERATED_MODEL_PRESETS; default "tiny". */
  preset?: string;
  /** Weights seed (u32); default DEFAULT_SEED. */
  seed?: number;
}

export function defaultGeneratedModelDir(): string {
  return path.join(os.tmpdir(), "offline-batch-models");
}

/**
 * Returns the absolute path of the preset's GGUF, writing it first when the cache lacks it.
 * Safe across concurrent processes: the file appears only by an atomic rename of a complete one.
 */
export async function ensureGeneratedModel(opts: GeneratedModelOptions = {}): Promise<string> {
  const preset = getPreset(opts.preset ?? DEFAULT_PRESET);
  const seed = checkSeed(opts.seed ?? DEFAULT_SEED);
  const dir = path.resolve(opts.dir ?? defaultGeneratedModelDir());
  const file = path.join(dir, generatedModelFileName(preset, seed));
  if (await isFile(file)) return file;
  await mkdir(dir, { recursive: true });
  await writeGeneratedModel(file, { preset: preset.name, seed });
  return file;
}

/**
 * File name: preset, seed and a content version, a hash of everything written but the random data
 * (metadata, tokenizer, tensor shapes) plus GENERATOR_VERSION for the data, so any change regenerates.
 */
export function generatedModelFileName(preset: ModelPreset, seed: number): string {
  const contentVersion = createHash("sha256")
    .update(`generator ${GENERATOR_VERSION}\n`)
    .update(encodeHeader(buildLlamaModel(preset, seed)))
    .digest("hex")
    .slice(0, 12);
  return `${preset.name}-seed${seed}-${contentVersion}.gguf`;
}

/** Writes the model to `file` through a temporary sibling and a rename; returns its size in bytes. */
export async function writeGeneratedModel(file: string, opts: { preset?: string; seed?: number } = {}): Promise<number> {
  const preset = getPreset(opts.preset ?? DEFAULT_PRESET);
  const seed = checkSeed(opts.seed ?? DEFAULT_SEED);
  const temp = `${file}.${process.pid}-${randomUUID().slice(0, 8)}.tmp`;
  try {
    const bytes = await writeGgufFile(temp, buildLlamaModel(preset, seed));
    await rename(temp, file);
    return bytes;
  } catch (err) {
    await unlink(temp).catch(() => {});
    throw err;
  }
}

function checkSeed(seed: number): number {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new Error(`seed must be an integer in [0, 2^32), got ${seed}`);
  }
  return seed;
}
