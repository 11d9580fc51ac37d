// What answers a dataset job's rows when the runner runs it: the server it is sent to, else the model files the
// runner loads, each by its version (path, inode, size and times; not its content, which would be read in full).
// A job's record keeps its outputs under this, so an output written from another model's answers is not current.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parse } from "yaml";
import { fileVersion } from "../cache/model-identity.js";
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

/** A model reference's version: a file's as it stands, a download's reference (its file is named after it). */
async function refVersion(ref: string, base: string): Promise<string> {
  if (parseModelRef(ref).kind !== "file") return ref;
  return (await fileVersion(path.resolve(base, ref))) ?? `${ref} (unreadable)`;
}

export async function servedBy(config: Pick<Config, "modelPath" | "modelsFile">, remote?: string): Promise<string> {
  if (remote) return `server ${remote}`;
  if (config.modelPath) return `model ${await refVersion(config.modelPath, process.cwd())}`;
  if (!config.modelsFile) return "the generated model";
  const text = await readFile(config.modelsFile, "utf8").catch(() => "");
  let files: string[] = [];
  try {
    files = pathsIn(parse(text));
  } catch {
    // A models file that does not parse stops the run later, with its own error.
  }
  const base = path.dirname(path.resolve(config.modelsFile));
  const versions = await Promise.all(files.map((f) => refVersion(f, base)));
  return `models file ${text}\n${versions.join("\n")}`;
}
