// A model named by hf: or a URL, brought into MODELS_DIR once: resolved to its file (model-source.ts), transferred
// into a staging folder by a stream whose resume never trusts a byte that did not reach the disk (model-transfer.ts),
// checked (its sha256 against Hugging Face's or the URL's #sha256, the size, the GGUF header, every tensor within the
// file), and only then renamed into place. The models folder so holds whole, checked files only: a kill mid-download
// leaves the staging copy, which the next start resumes.
import { randomUUID } from "node:crypto";
import { mkdir, readFile, rename, rm, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { lock } from "proper-lockfile";
import { describeModelRef, downloadedFile, type ModelRef, modelFileName, parseModelRef } from "../../config/model-ref.js";
import { isFile } from "./files.js";
import { checkGgufFile, ModelFileError } from "./gguf-check.js";
import { type RemoteFile, resolveSource, SourceError, SplitModelError, UnreachableError } from "./model-source.js";
import { discard, RECORD_SUFFIX, transfer } from "./model-transfer.js";

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
  /** How long each request that resolves the file may take. */
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
/** An unfinished download's file in the staging folder is the model's file name with this after it. */
export const PART_SUFFIX = ".part";
/** A lock not refreshed for this long belongs to a process that died (kill -9, a lost node): it is taken over. */
const LOCK_STALE_MS = 15_000;

type RemoteRef = Exclude<ModelRef, { kind: "file" }>;
type Status = (s: Partial<DownloadStatus> & Pick<DownloadStatus, "state">) => void;

/**
 * The local file for `refText`: a file as it is; a download's file in `opts.dir`, fetched and checked first where it
 * is missing. A file already in the folder is used without contacting the host. Throws ModelDownloadError or
 * ModelFileError, each one line.
 */
export async function fetchModel(refText: string, opts: FetchModelOptions): Promise<string> {
  const ref = parseModelRef(refText);
  if (ref.kind === "file") return path.resolve(ref.path);
  const name = modelFileName(ref);
  const target = downloadedFile(opts.dir, ref);
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
  const status: Status = (s) =>
    opts.onStatus?.({ model: label, file: name, bytes: 0, totalBytes: 0, bytesPerSecond: 0, etaSeconds: null, ...s });
  const held = await takeLock(path.join(staging, name), target, label, opts, () => status({ state: "waiting" })).catch((err) => {
    // A models volume mounted read-only, a folder of another user's.
    throw (err as NodeJS.ErrnoException).code ? unwritable(err) : err;
  });
  if (held === "done") return target;
  try {
    if (await isFile(target)) return target;
    const part = path.join(staging, name + PART_SUFFIX);
    // An earlier release's staging copy (ipull's), whose record of what it holds is not trusted.
    await rm(path.join(staging, `${name}.ipull`), { force: true });
    const src = await source(ref, label, opts);
    const got = await download(src, part, label, opts, held.signal, status);
    status({ state: "checking", bytes: got.bytes, totalBytes: got.bytes });
    try {
      if (src.sha256 && got.sha256 !== src.sha256)
        throw new ModelFileError(
          `${label}: its sha256 is ${got.sha256} where ${src.sha256From} gives ${src.sha256}; the download was deleted, the next start downloads it again`,
        );
      await checkGgufFile(part, { label, expectedBytes: src.size ?? got.bytes });
    } catch (err) {
      // A whole file that is not the model is not worth resuming: the next start fetches it afresh.
      await discard(part);
      throw err;
    }
    await rename(part, target);
    await rm(part + RECORD_SUFFIX, { force: true });
    status({ state: "done", bytes: got.bytes, totalBytes: got.bytes });
    const checked = src.sha256 ? `checked against ${src.sha256From}'s` : "the host gives none to check it against";
    opts.log?.(`downloaded ${label} into ${target} (sha256 ${got.sha256}, ${checked})`, {
      model: label,
      file: target,
      bytes: got.bytes,
      sha256: got.sha256,
    });
    return target;
  } finally {
    await held.release();
  }
}

/** What the reference downloads, each failure one line saying what to do. */
async function source(ref: RemoteRef, label: string, opts: FetchModelOptions): Promise<RemoteFile> {
  const setting = opts.setting ?? "MODEL_PATH";
  try {
    return await resolveSource(ref, { ...opts, timeoutMs: opts.connectTimeoutMs });
  } catch (err) {
    if (err instanceof UnreachableError)
      throw new ModelDownloadError(
        `${label}: ${err.message}; download the .gguf where the network allows and set ${setting} to the local file`,
      );
    if (err instanceof SplitModelError)
      throw new ModelDownloadError(
        `${label}: is split into several files (${err.file}), which this service does not join; merge them (llama-gguf-split --merge) and set ${setting} to the merged file`,
      );
    if (err instanceof SourceError) throw new ModelDownloadError(`${label}: ${err.message}`);
    throw err;
  }
}

async function download(src: RemoteFile, part: string, label: string, opts: FetchModelOptions, lost: AbortSignal, status: Status) {
  const progress = progressReporter(label, opts, status);
  const signal = opts.signal ? AbortSignal.any([opts.signal, lost]) : lost;
  const total = src.size ?? 0;
  opts.log?.(`downloading ${label} into ${opts.dir} (${total ? formatBytes(total) : "size not announced"})`, {
    model: label,
    total_bytes: total,
  });
  status({ state: "downloading", bytes: 0, totalBytes: total });
  try {
    const got = await transfer(src, part, {
      signal,
      onResume: (bytes) => {
        opts.log?.(`resuming ${label} from the ${formatBytes(bytes)} a stopped download left`, { model: label, bytes });
        progress({ downloadedSize: bytes, totalSize: total });
      },
      onProgress: (bytes, size) => progress({ downloadedSize: bytes, totalSize: size }),
    });
    progress.finish();
    return got;
  } catch (err) {
    if (lost.aborted) throw lost.reason;
    if (signal.aborted) throw err;
    throw new ModelDownloadError(`${label}: the download failed (${oneLine(err)}); the next start resumes it`);
  }
}

/** Who holds a download's lock, written beside it: a holder on this machine whose process is gone is known dead at once. */
interface LockOwner {
  host: string;
  pid: number;
  token: string;
}

/** The locks this process holds, by token (one process may wait on its own download, as two models' loads do). */
const heldTokens = new Set<string>();

/**
 * One process downloads a file at a time, whichever machine shares the folder: the others wait, and use the file
 * once it is in place ("done"). A lock left by a dead process is taken over: at once where its holder ran on this
 * machine (a kill -9, an OOM kill, a container restarted in its pod), else once it went stale.
 */
async function takeLock(
  file: string,
  target: string,
  label: string,
  opts: FetchModelOptions,
  onWait: () => void,
): Promise<{ release: () => Promise<void>; signal: AbortSignal } | "done"> {
  await mkdir(path.dirname(file), { recursive: true });
  const ownerFile = `${file}.owner.json`;
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
      const owner: LockOwner = { host: os.hostname(), pid: process.pid, token: randomUUID() };
      heldTokens.add(owner.token);
      await writeFile(ownerFile, JSON.stringify(owner));
      return {
        release: async () => {
          heldTokens.delete(owner.token);
          await rm(ownerFile, { force: true });
          await release().catch(() => {});
        },
        signal: lost.signal,
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ELOCKED") throw err;
    }
    // Its mtime put in the past, the lock is stale to proper-lockfile, which takes it over on the next try.
    if (await ownerDead(ownerFile)) {
      await utimes(`${file}.lock`, 0, 0).catch(() => {});
      continue;
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

/** True only where the lock's holder ran on this machine and is gone; a holder elsewhere is waited for until stale. */
async function ownerDead(ownerFile: string): Promise<boolean> {
  let owner: LockOwner;
  try {
    owner = JSON.parse(await readFile(ownerFile, "utf8")) as LockOwner;
  } catch {
    return false;
  }
  if (owner.host !== os.hostname()) return false;
  // The same pid is this process (a container's pid 1 restarted): dead unless this process holds that token.
  if (owner.pid === process.pid) return !heldTokens.has(owner.token);
  try {
    process.kill(owner.pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/** The download's progress: to the status callback at every step, to the log every few seconds as a bar. */
function progressReporter(label: string, opts: FetchModelOptions, status: Status) {
  let logged = 0;
  let last: Progress | undefined;
  // The rate is this run's own (bytes since its first report over the time since): a resumed download's kept bytes
  // are not counted as transferred.
  let first: { at: number; bytes: number } | undefined;
  const report = (p: { totalSize: number; downloadedSize: number }) => {
    first ??= { at: Date.now(), bytes: p.downloadedSize };
    const seconds = (Date.now() - first.at) / 1000;
    const rate = seconds >= 0.5 ? (p.downloadedSize - first.bytes) / seconds : 0;
    const eta = rate > 0 && p.totalSize > 0 ? Math.round((p.totalSize - p.downloadedSize) / rate) : null;
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
      const total = last.totalBytes || last.bytes;
      const rate = seconds > 0 ? Math.round((total - first.bytes) / seconds) : 0;
      const done = { ...last, bytes: total, totalBytes: total, bytesPerSecond: rate, etaSeconds: 0 };
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

const oneLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split("\n")[0].slice(0, 300);
