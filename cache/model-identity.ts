// A model's identity for the result cache: a local GGUF by its content (its sha256, computed once per version of the
// file and remembered in a sidecar so a restart does not read gigabytes again; a file changed under the same path is
// another version, so another identity), an upstream by its base URLs and model name.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, readFile, realpath, rename, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { canonicalJson } from "./rule.js";

/**
 * What names a version of a file without reading it: a replacement changes its inode, a rewrite its size or times.
 * The change time too, which no program sets: a copy in place that keeps the size and restores the mtime (`cp -p`,
 * `rsync --inplace -t`) still moves it.
 */
const versionOf = (s: { dev: number; ino: number; size: number; mtimeMs: number; ctimeMs: number }) =>
  `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;

/** Sidecar writes one at a time in this process: each reads, adds and replaces the whole file. */
let sidecarChain: Promise<unknown> = Promise.resolve();

/**
 * The sha256 (hex) of a file's content, read from `sidecar` when this version of the file was hashed before. The
 * sidecar holds a JSON object of version -> digest; one that cannot be read is rebuilt, never trusted in part.
 */
export async function fileDigest(file: string, sidecar: string): Promise<string> {
  const path_ = await realpath(file);
  const version = `${path_}|${versionOf(await stat(path_))}`;
  const known = await readSidecar(sidecar);
  if (typeof known[version] === "string") return known[version];
  const hash = createHash("sha256");
  await pipeline(createReadStream(path_), hash);
  const digest = hash.digest("hex");
  // The file may have changed while it was read: the digest is kept only for the version that was there before and after.
  if (`${path_}|${versionOf(await stat(path_))}` !== version) return fileDigest(file, sidecar);
  const write = sidecarChain.then(async () => {
    const now = await readSidecar(sidecar);
    now[version] = digest;
    await mkdir(path.dirname(sidecar), { recursive: true });
    const tmp = `${sidecar}.${process.pid}.tmp`;
    await writeFile(tmp, JSON.stringify(now, null, 1));
    await rename(tmp, sidecar);
  });
  sidecarChain = write.catch(() => undefined);
  await write.catch(() => undefined);
  return digest;
}

async function readSidecar(sidecar: string): Promise<Record<string, string>> {
  try {
    const v = JSON.parse(await readFile(sidecar, "utf8")) as unknown;
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, string>) : {};
  } catch {
    return {};
  }
}

/** What changes a local model's answers besides its weights: the engine's build and the settings that shape decoding. */
export interface EngineBuildIdentity {
  nodeLlamaCpp: string;
  /** "prebuilt" or "patched", and the patches' key when patched. */
  build: string;
  patchKey: string | null;
  /** Settings that change an answer (the context size, reproducible decoding, the KV cache's layout, GPU offload). */
  settings: Readonly<Record<string, unknown>>;
}

/** A local model's identity: its content's digest and the build that runs it. */
export const localIdentity = (digest: string, engine: EngineBuildIdentity) => canonicalJson({ kind: "local", sha256: digest, engine });

/** A LoRA adapter's identity: its base's, its file's content and the scale it is applied at. */
export const adapterIdentity = (base: string, digest: string, scale: number) =>
  canonicalJson({ kind: "adapter", base, sha256: digest, scale });

/** An upstream model's identity: where it is served and under which name (its base URLs in any order). */
export const upstreamIdentity = (baseUrls: readonly string[], model: string) =>
  canonicalJson({ kind: "upstream", baseUrls: [...baseUrls].map((u) => u.replace(/\/+$/, "")).sort(), model });
