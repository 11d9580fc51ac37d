// A model named by hf: or a URL, brought into MODELS_DIR once: node-llama-cpp's downloader (its hf: resolution and
// ipull's resumable transfer) writes into a staging folder, the file is checked (the size the server announced, the
// GGUF header, every tensor within the file), and only then renamed into place. The models folder so holds whole,
// checked files only: a kill mid-download leaves the staging copy, which the next start resumes.
import { mkdir, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { createModelDownloader, type ModelDownloader } from "node-llama-cpp";
import { lock } from "proper-lockfile";
import { describeModelRef, type ModelRef, modelFileName, parseModelRef } from "../config/model-ref.js";
import { checkGgufFile, ModelFileError } from "./gguf-check.js";

/** A download as the log and /ready show it. */
export interface DownloadStatus {
  /** The reference, without a URL's query string. */
  model: string;
  /** Its file in MODELS_DIR. */
  file: string;
  state: "waiting" | "downloading" | "checking" | "done";
  bytes: number;
  totalBytes: number;
  bytesPerSecond: number;
  /** Null until a rate is known. */
  etaSeconds: number | null;
}

export interface FetchModelOptions {
  /** MODELS_DIR. */
  dir: string;
  /** Where hf: references resolve (HF_ENDPOINT). */
  hfEndpoint?: string;
  hfToken?: string;
  /** How an error tells the user to name a local file instead (MODEL_PATH, --model, a models file's path). */
  setting?: string;
  onStatus?: (status: DownloadStatus) => void;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  signal?: AbortSignal;
  /** How long the first contact with the host may take. */
  connectTimeoutMs?: number;
}

/** A model that could not be brought in; the message is one line naming it and what to do. */
export class ModelDownloadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ModelDownloadError";
  }
}

/** Where unfinished downloads and their locks live, inside MODELS_DIR (so the final rename stays on one disk). */
export const STAGING_FOLDER = ".downloading";
/** A lock not refreshed for this long belongs to a process that died (kill -9, a lost node): it is taken over. */
const LOCK_STALE_MS = 15_000;

type RemoteRef = Exclude<ModelRef, { kind: "file" }>;

/**
 * The local file for `refText`: a file as it is; a download's file in `opts.dir`, fetched and checked first where it
 * is missing. A file already in the folder is used without contacting the host. Throws ModelDownloadError or
 * ModelFileError, each one line.
 */
export async function fetchModel(refText: string, opts: FetchModelOptions): Promise<string> {
  const ref = parseModelRef(refText);
  if (ref.kind === "file") return path.resolve(ref.path);
  const name = modelFileName(ref);
  const target = path.join(opts.dir, name);
  const label = describeModelRef(ref);
  if (await isFile(target)) {
    await checkGgufFile(target, { label: `${label} (${target})` }).catch((err: Error) => {
      // Only checked files are put there: this one was changed since (a copy, a damaged disk).
      throw new ModelFileError(`${err.message}; delete it to download it again`);
    });
    return target;
  }
  const staging = path.join(opts.dir, STAGING_FOLDER);
  const unwritable = (err: unknown) =>
    new ModelDownloadError(
      `${label}: cannot write in ${staging} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); set MODELS_DIR to a writable folder`,
    );
  try {
    await mkdir(staging, { recursive: true });
  } catch (err) {
    throw unwritable(err);
  }
  const status = (s: Partial<DownloadStatus> & Pick<DownloadStatus, "state">) =>
    opts.onStatus?.({ model: label, file: name, bytes: 0, totalBytes: 0, bytesPerSecond: 0, etaSeconds: null, ...s });
  const held = await takeLock(path.join(staging, name), target, label, opts, () => status({ state: "waiting" })).catch((err) => {
    // A models volume mounted read-only, a folder of another user's.
    throw (err as NodeJS.ErrnoException).code ? unwritable(err) : err;
  });
  if (held === "done") return target;
  try {
    if (await isFile(target)) return target;
    const { file, totalBytes } = await download(ref, staging, name, label, opts, held.signal, status);
    status({ state: "checking", bytes: totalBytes, totalBytes });
    try {
      await checkGgufFile(file, { label, expectedBytes: totalBytes });
    } catch (err) {
      // A whole file that is not a model is not worth resuming: the next start fetches it afresh.
      await rm(file, { force: true });
      throw err;
    }
    await rename(file, target);
    status({ state: "done", bytes: totalBytes, totalBytes });
    opts.log?.(`downloaded ${label} into ${target}`, { model: label, file: target, bytes: totalBytes });
    return target;
  } finally {
    await held.release();
  }
}

/**
 * One process downloads a file at a time, whichever machine shares the folder: the others wait, and use the file
 * once it is in place ("done"). A lock left by a dead process goes stale and is taken over.
 */
async function takeLock(
  file: string,
  target: string,
  label: string,
  opts: FetchModelOptions,
  onWait: () => void,
): Promise<{ release: () => Promise<void>; signal: AbortSignal } | "done"> {
  let told = false;
  for (;;) {
    opts.signal?.throwIfAborted();
    const lost = new AbortController();
    try {
      const release = await lock(file, {
        realpath: false,
        stale: LOCK_STALE_MS,
        update: LOCK_STALE_MS / 3,
        // Another process took the lock over (this one stalled past the stale time): it must not write beside it.
        onCompromised: (err) => lost.abort(new ModelDownloadError(`${label}: the download's lock was lost (${err.message})`)),
      });
      return { release: () => release().catch(() => {}), signal: lost.signal };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ELOCKED") throw err;
    }
    if (!told) {
      told = true;
      onWait();
      opts.log?.(`another process is downloading ${label}: waiting for it`, { model: label });
    }
    await new Promise((r) => setTimeout(r, 1000));
    if (await isFile(target)) return "done";
  }
}

async function download(
  ref: RemoteRef,
  staging: string,
  name: string,
  label: string,
  opts: FetchModelOptions,
  lost: AbortSignal,
  status: (s: Partial<DownloadStatus> & Pick<DownloadStatus, "state">) => void,
): Promise<{ file: string; totalBytes: number }> {
  await reachable(ref, label, opts);
  const progress = progressReporter(label, opts, status);
  let downloader: ModelDownloader;
  try {
    downloader = await createModelDownloader({
      modelUri: ref.kind === "hf" ? ref.uri : ref.url,
      dirPath: staging,
      fileName: name,
      showCliProgress: false,
      // A stop keeps what came: the next start resumes it.
      deleteTempFileOnCancel: false,
      skipExisting: true,
      endpoints: { huggingFace: opts.hfEndpoint },
      ...(opts.hfToken ? { tokens: { huggingFace: opts.hfToken } } : {}),
      onProgress: progress,
    });
  } catch (err) {
    throw new ModelDownloadError(`${label}: ${oneLine(err)}`);
  }
  if (downloader.totalFiles !== 1 || downloader.splitBinaryParts) {
    await downloader.cancel({ deleteTempFile: false });
    throw new ModelDownloadError(
      `${label}: is split into several files, which this service does not join; merge them (llama-gguf-split --merge) and set ${opts.setting ?? "MODEL_PATH"} to the merged file`,
    );
  }
  const totalBytes = downloader.totalSize;
  const signal = opts.signal ? AbortSignal.any([opts.signal, lost]) : lost;
  opts.log?.(`downloading ${label} into ${opts.dir} (${formatBytes(totalBytes)})`, { model: label, total_bytes: totalBytes });
  status({ state: "downloading", bytes: downloader.downloadedSize, totalBytes });
  try {
    await downloader.download({ signal });
  } catch (err) {
    if (lost.aborted) throw lost.reason;
    throw signal.aborted ? err : new ModelDownloadError(`${label}: the download failed (${oneLine(err)}); the next start resumes it`);
  }
  // A stop ends ipull's transfer without an error: what it left is unfinished, never a file to check.
  signal.throwIfAborted();
  progress.finish();
  return { file: downloader.entrypointFilePath, totalBytes };
}

/**
 * The host answers before the download begins: node-llama-cpp's downloader retries a refused connection for minutes,
 * where a user wants one line at once. An http error is reported as the server gave it.
 */
async function reachable(ref: RemoteRef, label: string, opts: FetchModelOptions): Promise<void> {
  const url = ref.kind === "url" ? ref.url : (opts.hfEndpoint ?? "https://huggingface.co");
  const host = new URL(url).host;
  let res: Response;
  try {
    res = await fetch(url, { method: "HEAD", redirect: "follow", signal: AbortSignal.timeout(opts.connectTimeoutMs ?? 30_000) });
  } catch (err) {
    if (opts.signal?.aborted) throw err;
    const e = err as Error & { cause?: NodeJS.ErrnoException };
    const why = e.name === "TimeoutError" ? "no answer" : (e.cause?.code ?? e.cause?.message ?? e.message);
    throw new ModelDownloadError(
      `${label}: cannot reach ${host} (${why}); download the .gguf where the network allows and set ${opts.setting ?? "MODEL_PATH"} to the local file`,
    );
  }
  // A server that does not do HEAD still serves GET (ipull falls back to it).
  if (ref.kind === "url" && res.status >= 400 && res.status !== 405 && res.status !== 501)
    throw new ModelDownloadError(`${label}: ${host} answered ${res.status} ${res.statusText}`.trim());
}

/** The download's progress: to the status callback at every step, to the log every few seconds as a bar. */
function progressReporter(
  label: string,
  opts: FetchModelOptions,
  status: (s: Partial<DownloadStatus> & Pick<DownloadStatus, "state">) => void,
) {
  let logged = 0;
  let last: Progress | undefined;
  // The rate is this run's own (bytes since its first report over the time since): a resumed download's kept bytes
  // are not counted as transferred, and the first seconds are not averaged over ten as ipull's figure is.
  let first: { at: number; bytes: number } | undefined;
  const report = (p: { totalSize: number; downloadedSize: number }) => {
    first ??= { at: Date.now(), bytes: p.downloadedSize };
    const seconds = (Date.now() - first.at) / 1000;
    const rate = seconds >= 0.5 ? (p.downloadedSize - first.bytes) / seconds : 0;
    const eta = rate > 0 ? Math.round((p.totalSize - p.downloadedSize) / rate) : null;
    last = { model: label, bytes: p.downloadedSize, totalBytes: p.totalSize, bytesPerSecond: Math.round(rate), etaSeconds: eta };
    status({ state: "downloading", ...last });
    if (Date.now() - logged >= LOG_EVERY_MS) {
      logged = Date.now();
      opts.log?.(progressLine(last), fieldsOf(last));
    }
  };
  return Object.assign(report, {
    /** The last line: all of it, at this run's average rate. */
    finish() {
      if (!last || !first) return;
      const seconds = (Date.now() - first.at) / 1000;
      const rate = seconds > 0 ? Math.round((last.totalBytes - first.bytes) / seconds) : 0;
      const done = { ...last, bytes: last.totalBytes, bytesPerSecond: rate, etaSeconds: 0 };
      opts.log?.(progressLine(done), fieldsOf(done));
    },
  });
}

const LOG_EVERY_MS = 2_000;
const BAR_WIDTH = 20;

type Progress = Pick<DownloadStatus, "model" | "bytes" | "totalBytes" | "bytesPerSecond" | "etaSeconds">;

const fieldsOf = (s: Progress) => ({
  model: s.model,
  bytes: s.bytes,
  total_bytes: s.totalBytes,
  bytes_per_second: s.bytesPerSecond,
  eta_seconds: s.etaSeconds,
});

/** `downloading hf:x/y:Q8_0 [######..............] 31% 210 MB of 676 MB, 12.5 MB/s, 37 s left` */
export function progressLine(s: Progress): string {
  const share = s.totalBytes > 0 ? Math.min(1, s.bytes / s.totalBytes) : 0;
  const filled = Math.round(share * BAR_WIDTH);
  const bar = `[${"#".repeat(filled)}${".".repeat(BAR_WIDTH - filled)}]`;
  const rate = s.bytesPerSecond > 0 ? `, ${formatBytes(s.bytesPerSecond)}/s` : "";
  const eta = s.etaSeconds === null ? "" : `, ${formatSeconds(s.etaSeconds)} left`;
  return `downloading ${s.model} ${bar} ${Math.floor(share * 100)}% ${formatBytes(s.bytes)} of ${formatBytes(s.totalBytes)}${rate}${eta}`;
}

export function formatBytes(n: number): string {
  if (n < 1000) return `${n} B`;
  const units = ["kB", "MB", "GB", "TB"];
  let v = n;
  let i = -1;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

function formatSeconds(s: number): string {
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

async function isFile(p: string): Promise<boolean> {
  try {
    return (await stat(p)).isFile();
  } catch {
    return false;
  }
}

const oneLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split("\n")[0].slice(0, 300);
