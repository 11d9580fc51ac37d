// What answers a dataset job's rows when the runner runs it: the server it is sent to, else the model files the
// runner loads, each by its content (its sha256, hashed once per version of the file and remembered beside the
// result cache, as the cache's own key does: a file moved or touched is the same model). A job's record keeps its
// outputs under this, so an output written from another model's answers is not current.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parseModelsFile } from "../backends/registry.js";
import { fileDigest } from "../cache/model-identity.js";
import { digestsFile } from "../cache/open.js";
import type { Config } from "../config/config.js";
import { parseModelRef } from "../config/model-ref.js";

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
  // Read as the run reads it (paths resolved beside the file): one it cannot read stops the run later, with its error.
  let files: string[] = [];
  try {
    const models = parseModelsFile(text, config.modelsFile, process.env).models;
    files = models.flatMap((m) =>
      m.backend.kind === "local" ? [m.backend.path, ...(m.backend.adapter ? [m.backend.adapter.path] : [])] : [],
    );
  } catch {
    // Its content alone then names it.
  }
  const contents = await Promise.all(files.map((f) => refContent(f, process.cwd(), sidecar)));
  return `models file ${text}\n${contents.join("\n")}`;
}
