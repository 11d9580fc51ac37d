// Where a download's bytes come from and what they must be: an hf: reference resolved as Hugging Face's own clients
// do (a quantization through the repository's manifest, then the file's resolve URL, whose answer gives the file's
// size and, for an LFS file, its sha256), or a URL with its size and version as the host announces them.
import { readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { ModelRef } from "../../config/model-ref.js";

/** What a download fetches, and what identifies the version it fetches. */
export interface RemoteFile {
  /** What is fetched (redirects followed). */
  url: string;
  /** Sent with every request to `url` (a Hugging Face token); fetch drops them on a redirect to another host. */
  headers: Record<string, string>;
  /** The size announced; undefined where none was. */
  size?: number;
  /** What the file's sha256 must be (lowercase hex): Hugging Face's for an LFS file, or the URL's #sha256. */
  sha256?: string;
  /** Where the hash comes from, as an error names it. */
  sha256From?: string;
  /** A strong ETag or a Last-Modified date: a resumed transfer asks for the rest of this version only (If-Range). */
  version?: string;
}

/** A reference the host answered about in a way that ends the download; the message is one line. */
export class SourceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SourceError";
  }
}

/** The host could not be reached at all (refused, unknown name, no answer). */
export class UnreachableError extends SourceError {}

export interface SourceOptions {
  /** Where hf: references resolve (HF_ENDPOINT). */
  hfEndpoint?: string;
  /** HF_TOKEN; else the token file Hugging Face's CLI writes. */
  hfToken?: string;
  signal?: AbortSignal;
  /** How long each request of the resolution may take. */
  timeoutMs?: number;
}

const HF = "https://huggingface.co";
const SHA256 = /^[0-9a-f]{64}$/;
/** A model split into parts, which this service does not join. */
export const SPLIT_PART = /-\d{5}-of-\d{5}\.gguf$/i;

/** What `ref` downloads. Throws SourceError (UnreachableError where the host cannot be reached), one line. */
export async function resolveSource(ref: Exclude<ModelRef, { kind: "file" }>, opts: SourceOptions): Promise<RemoteFile> {
  if (ref.kind === "url") return urlSource(ref.url, ref.sha256, opts);
  const endpoint = (opts.hfEndpoint || HF).replace(/\/+$/, "");
  const token = opts.hfToken || (await savedHfToken());
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const file = ref.file ?? (await manifestFile(endpoint, ref, headers, opts));
  if (SPLIT_PART.test(file)) throw new SplitModelError(file);
  const url = `${endpoint}/${enc(ref.owner)}/${enc(ref.repo)}/resolve/main/${file.split("/").map(enc).join("/")}`;
  const head = await headResolve(url, headers, opts, file);
  const linked = head.headers.get("x-linked-etag") ?? head.headers.get("etag");
  const sha256 = linked ? unquote(linked).toLowerCase() : undefined;
  const size = Number(head.headers.get("x-linked-size") ?? (head.status === 200 ? head.headers.get("content-length") : undefined));
  return {
    url,
    headers,
    ...(Number.isSafeInteger(size) && size > 0 ? { size } : {}),
    // A file kept in git (not LFS) has a git hash there, not a sha256: such a file is checked by its size and header only.
    ...(sha256 && SHA256.test(sha256) ? { sha256, sha256From: "Hugging Face" } : {}),
  };
}

/** A split model's part; the caller names the setting to change. */
export class SplitModelError extends SourceError {
  constructor(readonly file: string) {
    super(`${file} is one part of a model split into several files`);
  }
}

/** hf:<owner>/<repo>[:<quant>]'s file, from the manifest llama.cpp's clients read (it names the GGUF of a quantization). */
async function manifestFile(
  endpoint: string,
  ref: Extract<ModelRef, { kind: "hf" }>,
  headers: Record<string, string>,
  opts: SourceOptions,
) {
  const tag = ref.quant ?? "latest";
  const res = await request(`${endpoint}/v2/${enc(ref.owner)}/${enc(ref.repo)}/manifests/${enc(tag)}`, opts, {
    // Hugging Face answers with the GGUF file (ggufFile) to llama.cpp's user agent only.
    headers: { ...headers, "user-agent": "llama-cpp", accept: "application/json" },
  });
  if (res.status === 401 || res.status === 403) throw gated(res, endpoint);
  if (res.status === 400 || res.status === 404)
    throw new SourceError(
      ref.quant
        ? `the repository has no GGUF of quantization ${ref.quant}, or does not exist (${answered(res, endpoint)})`
        : `the repository does not exist or has no GGUF file (${answered(res, endpoint)})`,
    );
  if (!res.ok) throw new SourceError(answered(res, endpoint));
  const body = (await res.json().catch(() => undefined)) as { ggufFile?: { rfilename?: unknown } } | undefined;
  const file = body?.ggufFile?.rfilename;
  if (typeof file !== "string" || !file) throw new SourceError(`${new URL(endpoint).host} did not name the repository's GGUF file`);
  return file;
}

/**
 * The resolve URL's own answer, without following the redirect to the storage host: Hugging Face sends the file's
 * size and hash there (X-Linked-Size, X-Linked-Etag), as huggingface_hub reads them. A relative redirect (a renamed
 * repository) is followed, as huggingface_hub does.
 */
async function headResolve(url: string, headers: Record<string, string>, opts: SourceOptions, file: string): Promise<Response> {
  let at = url;
  for (let hops = 0; ; hops++) {
    const res = await request(at, opts, { method: "HEAD", headers, redirect: "manual" });
    const location = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && location) {
      if (location.startsWith("/") && !location.startsWith("//") && hops < 5) {
        at = new URL(location, at).href;
        continue;
      }
      return res;
    }
    if (res.status === 401 || res.status === 403) throw gated(res, url);
    if (res.status === 404) throw new SourceError(`the repository has no file ${file} (${answered(res, url)})`);
    if (res.status >= 400) throw new SourceError(answered(res, url));
    return res;
  }
}

/** A URL's size and version from a HEAD; a host that does not do HEAD is asked nothing more (the GET tells). */
async function urlSource(url: string, sha256: string | undefined, opts: SourceOptions): Promise<RemoteFile> {
  const res = await request(url, opts, { method: "HEAD" });
  const hash = sha256 ? { sha256, sha256From: "the URL's #sha256" } : {};
  if (res.status === 405 || res.status === 501) return { url, headers: {}, ...hash };
  if (res.status >= 400) throw new SourceError(answered(res, url));
  const size = Number(res.headers.get("content-length"));
  const etag = res.headers.get("etag");
  const version = etag && !etag.startsWith("W/") ? etag : (res.headers.get("last-modified") ?? undefined);
  return {
    url,
    headers: {},
    ...(Number.isSafeInteger(size) && size > 0 && !res.headers.get("content-encoding") ? { size } : {}),
    ...(version ? { version } : {}),
    ...hash,
  };
}

async function request(url: string, opts: SourceOptions, init: RequestInit): Promise<Response> {
  const timeout = AbortSignal.timeout(opts.timeoutMs ?? 30_000);
  try {
    return await fetch(url, { ...init, signal: opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout });
  } catch (err) {
    if (opts.signal?.aborted) throw err;
    const e = err as Error & { cause?: NodeJS.ErrnoException };
    const why = e.name === "TimeoutError" ? "no answer" : (e.cause?.code ?? e.cause?.message ?? e.message);
    throw new UnreachableError(`cannot reach ${new URL(url).host} (${why})`);
  }
}

const gated = (res: Response, url: string) =>
  new SourceError(`the repository is gated or private (${answered(res, url)}): set HF_TOKEN to a token that may read it`);

const answered = (res: Response, url: string) => `${new URL(url).host} answered ${res.status} ${res.statusText}`.trim();

const enc = (s: string) => encodeURIComponent(s);

const unquote = (etag: string) => etag.replace(/^W\//, "").replace(/^"|"$/g, "");

/** The token Hugging Face's CLI saves on login (HF_TOKEN_PATH, else $HF_HOME/token), as its own clients find it. */
async function savedHfToken(): Promise<string | undefined> {
  const home = process.env.HF_HOME || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "huggingface");
  try {
    return (await readFile(process.env.HF_TOKEN_PATH || path.join(home, "token"), "utf8")).trim() || undefined;
  } catch {
    return undefined;
  }
}
