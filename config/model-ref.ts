// What MODEL_PATH, a models file's `path` and the runner's --model may name: a GGUF file, a Hugging Face reference
// (hf:<owner>/<repo>[:<quant>] or hf:<owner>/<repo>/<file>.gguf) or an http(s) URL of a .gguf (with the file's sha256
// as #sha256=<hex> where the user knows it), and the file name a download of it is kept under in MODELS_DIR.
import { createHash } from "node:crypto";
import path from "node:path";

export type ModelRef =
  | { kind: "file"; path: string }
  | { kind: "hf"; uri: string; owner: string; repo: string; quant?: string; file?: string }
  /** `url` without its fragment; `sha256` (lowercase hex) what the file's must be, from `#sha256=`. */
  | { kind: "url"; url: string; sha256?: string };

/** The forms, as an error names them. */
export const MODEL_REF_FORMS = "a .gguf file, hf:<owner>/<repo>[:<quant>] or an https:// URL of a .gguf";

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const QUANT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** True for what names a download rather than a file (what must not be resolved as a path). */
export const isRemoteModel = (text: string): boolean => /^(hf:|https?:\/\/)/i.test(text.trim());

/** Reads a reference; throws an Error whose message is one line saying what is wrong with it. */
export function parseModelRef(text: string): ModelRef {
  const s = text.trim();
  if (/^hf:/i.test(s)) return parseHf(s.slice(3));
  if (/^https?:\/\//i.test(s)) return parseUrl(s);
  // Anything else with a scheme is a URL this service cannot fetch, not a file name.
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(s);
  if (scheme) throw new Error(`${scheme[1]}:// is not supported: use ${MODEL_REF_FORMS}`);
  return { kind: "file", path: s };
}

function parseHf(rest: string): ModelRef {
  const bad = (why: string) => new Error(`not a Hugging Face reference (${why}): write hf:<owner>/<repo>[:<quant>], e.g. ${EXAMPLE}`);
  const parts = rest.replace(/^\/+/, "").split("/");
  if (parts.length < 2 || !parts[0] || !parts[1]) throw bad("it needs an owner and a repository");
  const [owner, repoAndQuant, ...fileParts] = parts;
  if (!NAME.test(owner)) throw bad(`the owner '${owner}' has characters a Hugging Face name cannot have`);
  if (fileParts.length > 0) {
    const file = fileParts.join("/");
    if (!NAME.test(repoAndQuant)) throw bad(`the repository '${repoAndQuant}' has characters a Hugging Face name cannot have`);
    if (fileParts.some((p) => !p || p === "." || p === "..") || !/\.gguf$/i.test(file))
      throw bad(`'${file}' is not the path of a .gguf file in the repository`);
    return { kind: "hf", uri: `hf:${owner}/${repoAndQuant}/${file}`, owner, repo: repoAndQuant, file };
  }
  const [repo, quant, ...more] = repoAndQuant.split(":");
  if (!NAME.test(repo)) throw bad(`the repository '${repo}' has characters a Hugging Face name cannot have`);
  if (more.length > 0 || (quant !== undefined && !QUANT.test(quant)))
    throw bad(`'${repoAndQuant.slice(repo.length + 1)}' is not a quantization such as Q4_K_M`);
  // Quantization tags are matched without regard to case; one spelling keeps one download.
  const q = quant?.toUpperCase();
  return { kind: "hf", uri: `hf:${owner}/${repo}${q ? `:${q}` : ""}`, owner, repo, ...(q ? { quant: q } : {}) };
}

function parseUrl(s: string): ModelRef {
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    throw new Error(`not a valid URL: use ${MODEL_REF_FORMS}`);
  }
  // Credentials in the URL would be written to the log and the models folder's names.
  if (url.username || url.password) throw new Error("a URL with a user name or password is not supported: use a URL without them");
  if (!/\.gguf$/i.test(decodeURIComponent(url.pathname))) throw new Error(`the URL's path must end in .gguf (a single-file GGUF model)`);
  // The fragment is never sent to the host: the only one taken is the file's hash, which the download is checked against.
  const fragment = url.hash.slice(1);
  url.hash = "";
  if (!fragment) return { kind: "url", url: url.href };
  const sha = /^sha256=([0-9a-f]{64})$/i.exec(fragment);
  if (!sha)
    throw new Error(`the URL's fragment '#${fragment.slice(0, 40)}' is not understood: the only one taken is #sha256=<64 hex digits>`);
  return { kind: "url", url: url.href, sha256: sha[1].toLowerCase() };
}

const EXAMPLE = "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0";

/** How logs and errors name a reference: a URL without its query string (which may carry a token) or its hash. */
export function describeModelRef(ref: ModelRef): string {
  if (ref.kind === "file") return ref.path;
  if (ref.kind === "hf") return ref.uri;
  const u = new URL(ref.url);
  return `${u.origin}${u.pathname}`;
}

/**
 * The file a download is kept under in MODELS_DIR: readable (the repository and quantization, or the URL's file name)
 * and unique to the reference (a hash of it), so two references never share a file and one reference always finds it.
 * A URL's #sha256 is part of the reference: a hash given or changed later names a new download, checked against it,
 * never a file kept without that check.
 */
export function modelFileName(ref: Exclude<ModelRef, { kind: "file" }>): string {
  const key = ref.kind === "hf" ? ref.uri : ref.sha256 ? `${ref.url}#sha256=${ref.sha256}` : ref.url;
  const hash = createHash("sha256").update(key).digest("hex").slice(0, 10);
  const readable =
    ref.kind === "hf"
      ? ref.file
        ? `${ref.owner}_${ref.repo}_${ref.file
            .split("/")
            .pop()!
            .replace(/\.gguf$/i, "")}`
        : `${ref.owner}_${ref.repo}${ref.quant ? `.${ref.quant}` : ""}`
      : decodeURIComponent(new URL(ref.url).pathname.split("/").pop()!).replace(/\.gguf$/i, "");
  const safe =
    readable
      .replace(/[^A-Za-z0-9._-]+/g, "_")
      .replace(/^[._]+/, "")
      .slice(0, 120) || "model";
  return `${safe}-${hash}.gguf`;
}

/** The name a model downloaded from `ref` is served under where nothing else names it (the one-model form). */
export function modelRefName(ref: Exclude<ModelRef, { kind: "file" }>): string {
  if (ref.kind === "hf") return ref.uri.slice(3);
  return decodeURIComponent(new URL(ref.url).pathname.split("/").pop()!).replace(/\.gguf$/i, "");
}

/** Where a download is kept: its file (modelFileName) in `modelsDir`, whether it is there yet or not. */
export const downloadedFile = (modelsDir: string, ref: Exclude<ModelRef, { kind: "file" }>) => path.join(modelsDir, modelFileName(ref));
