// What answers a dataset job's rows when the runner runs it: the server it is sent to, else the model files the
// runner loads, each by its content (its sha256, hashed once per version of the file and remembered beside the
// result cache, as the cache's own key does: a file moved or touched is the same model). A job's record keeps its
// outputs under this, so an output written from another model's answers is not current.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parse } from "yaml";
import { fileDigest } from "../cache/model-identity.js";
import { digestsFile } from "../cache/open.js";
import type { Config } from "../config/config.js";
import { parseModelRef } from "../config/model-ref.js";

/** Every string under a key named `path` in a models file: its models' and adapters' files. */
function pathsIn(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) for (const v of value) pathsIn(v, found);
  else if (value && typeof value === "object")
    for (const [k, v] of Object.entries(value)) {
      if (k === "path" && typeof v === "string") found.push(v);
      else pathsIn(v, found);
    }
  return found;
}

/** A model reference's content: a file's digest, a download's reference (its file is named after it). */
async function refContent(ref: string, base: string, sidecar: string): Promise<string> {
  if (parseModelRef(ref).kind !== "file") return ref;
  return fileDigest(path.resolve(base, ref), sidecar).catch(() => `${ref} (unreadable)`);
}

export async function servedBy(config: Pick<Config, "modelPath" | "modelsFile" | "batchDir">, remote?: string): Promise<string> {
  if (remote) return `server ${remote}`;
  const sidecar = digestsFile(config.batchDir);
  if (config.modelPath) return `model ${await refContent(config.modelPath, process.cwd(), sidecar)}`;
  if (!config.modelsFile) return "the generated model";
  const text = await readFile(config.modelsFile, "utf8").catch(() => "");
  let files: string[] = [];
  try {
    files = pathsIn(parse(text));
  } catch {
    // A models file that does not parse stops the run later, with its own error.
  }
  const base = path.dirname(path.resolve(config.modelsFile));
  const versions = await Promise.all(files.map((f) => refContent(f, base, sidecar)));
  return `models file ${text}\n${versions.join("\n")}`;
}
