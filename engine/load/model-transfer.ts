// One file's bytes from a URL into a staging file, resumable after a kill at any instant without trusting a byte
// that did not reach the disk: a single sequential stream whose data is synced before the record of how much of it
// is whole (the resume point) is replaced, the record naming the version it belongs to (size, sha256, ETag), so a
// file changed on the host is begun afresh rather than spliced. The sha256 of the whole file is computed on the way,
// the part kept from an earlier run read back from disk.
import { createHash } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { type FileHandle, open, readFile, rename, rm, stat } from "node:fs/promises";
import type { RemoteFile } from "./model-source.js";

export interface TransferOptions {
  signal?: AbortSignal;
  /** Bytes in the staging file and the file's size (0 while unknown), after each piece written. */
  onProgress?: (bytes: number, total: number) => void;
  /** Said once when a run goes on from bytes an earlier one kept. */
  onResume?: (bytes: number) => void;
  /** A connection silent this long is dropped, and the transfer goes on over a new one. */
  idleMs?: number;
  /** Bytes written between syncs; each sync moves the resume point. */
  syncBytes?: number;
  /** At most this long between syncs while bytes come (a slow link loses at most this much of its time to a kill). */
  syncMs?: number;
  /** Attempts in a row that bring no byte before the transfer gives up. */
  retries?: number;
}

export interface Transferred {
  bytes: number;
  /** Of the whole file as it is in the staging file. */
  sha256: string;
}

/** Beside the staging file: how much of it is on disk for sure, and of which version of the source. */
interface ResumeRecord {
  size: number | null;
  sha256: string | null;
  version: string | null;
  synced: number;
}

/** The resume record's file is the staging file's name with this after it. */
export const RECORD_SUFFIX = ".resume.json";

/** A transfer that stopped; `retryable` where another connection may get further. The message is one line. */
export class TransferError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = "TransferError";
  }
}

interface State {
  pos: number;
  synced: number;
  syncedAt: number;
  total: number;
  hash: ReturnType<typeof createHash>;
}

/**
 * Brings `src` into `file`, going on from what an earlier run synced there for the same version. Throws
 * TransferError, or the signal's reason when stopped; either way what reached the disk is kept for the next run.
 */
export async function transfer(src: RemoteFile, file: string, opts: TransferOptions = {}): Promise<Transferred> {
  const fd = await open(file, constants.O_RDWR | constants.O_CREAT, 0o644);
  const state: State = { pos: 0, synced: 0, syncedAt: Date.now(), total: src.size ?? 0, hash: createHash("sha256") };
  try {
    state.pos = state.synced = await keptBytes(file, src);
    // Bytes past the resume point were never synced (a kill, a power cut): they are not trusted.
    await fd.truncate(state.pos);
    if (state.pos > 0) {
      opts.onResume?.(state.pos);
      for await (const piece of createReadStream(file, { start: 0, end: state.pos - 1 })) state.hash.update(piece as Buffer);
    }
    await run(src, fd, file, state, opts);
    await sync(fd, file, src, state);
    return { bytes: state.pos, sha256: state.hash.digest("hex") };
  } catch (err) {
    await sync(fd, file, src, state).catch(() => {});
    throw err;
  } finally {
    await fd.close();
  }
}

/** Removes a staging file and its record. */
export async function discard(file: string): Promise<void> {
  await rm(file + RECORD_SUFFIX, { force: true });
  await rm(file, { force: true });
}

/** The bytes of `file` an earlier run synced for this version of `src`; 0 (the record removed) for any other. */
async function keptBytes(file: string, src: RemoteFile): Promise<number> {
  let record: ResumeRecord;
  try {
    record = JSON.parse(await readFile(file + RECORD_SUFFIX, "utf8")) as ResumeRecord;
  } catch {
    // No record: nothing was synced (or the file is another tool's), so nothing is kept.
    return 0;
  }
  const sameSize = record.size === null || src.size === undefined || record.size === src.size;
  const same = sameSize && record.sha256 === (src.sha256 ?? null) && record.version === (src.version ?? null);
  if (!same || !Number.isSafeInteger(record.synced) || record.synced < 0) {
    await rm(file + RECORD_SUFFIX, { force: true });
    return 0;
  }
  return Math.min(record.synced, (await stat(file).catch(() => ({ size: 0 }))).size);
}

async function run(src: RemoteFile, fd: FileHandle, file: string, state: State, opts: TransferOptions): Promise<void> {
  const retries = opts.retries ?? 5;
  let failures = 0;
  while (state.total === 0 || state.pos < state.total) {
    const before = state.pos;
    try {
      if (await attempt(src, fd, file, state, opts)) return;
      throw new TransferError(`the connection ended after ${state.pos} of ${state.total} bytes`, true);
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? err;
      const e = err instanceof TransferError ? err : new TransferError(why(err), true);
      failures = state.pos > before ? 1 : failures + 1;
      if (!e.retryable || failures > retries) throw e;
      await sync(fd, file, src, state);
      await sleep(Math.min(30_000, 1000 * 2 ** (failures - 1)), opts.signal);
    }
  }
}

/** One request for the rest of the file, its body written as it comes; true once the whole file is there. */
async function attempt(src: RemoteFile, fd: FileHandle, file: string, state: State, opts: TransferOptions): Promise<boolean> {
  const idle = new AbortController();
  const idleMs = opts.idleMs ?? 60_000;
  let timer = setTimeout(() => idle.abort(), idleMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, idle.signal]) : idle.signal;
  const headers: Record<string, string> = { ...src.headers, "accept-encoding": "identity" };
  if (state.pos > 0) {
    headers.range = `bytes=${state.pos}-`;
    if (src.version) headers["if-range"] = src.version;
  }
  try {
    const res = await fetch(src.url, { headers, signal });
    if (!(await accept(res, fd, file, state))) return true;
    for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) {
      clearTimeout(timer);
      timer = setTimeout(() => idle.abort(), idleMs);
      if (state.total > 0 && state.pos + piece.length > state.total)
        throw new TransferError(`the host sent more than the file's ${state.total} bytes`, false);
      await writeAll(fd, piece, state.pos);
      state.hash.update(piece);
      state.pos += piece.length;
      if (state.pos - state.synced >= (opts.syncBytes ?? 16 * 2 ** 20) || Date.now() - state.syncedAt >= (opts.syncMs ?? 1000))
        await sync(fd, file, src, state);
      opts.onProgress?.(state.pos, state.total);
    }
    if (state.total === 0) state.total = state.pos;
    return state.pos === state.total;
  } catch (err) {
    if (idle.signal.aborted && !opts.signal?.aborted) throw new TransferError(`no data for ${idleMs / 1000} s`, true);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Whether the response carries bytes to write from `state.pos`: a range from there goes on; a whole file (the host
 * ignored the range, or If-Range found another version) begins again from 0. False where the file is already whole.
 */
async function accept(res: Response, fd: FileHandle, file: string, state: State): Promise<boolean> {
  const range = /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(res.headers.get("content-range") ?? "");
  if (res.status === 206 && range && Number(range[1]) === state.pos) {
    if (range[2] !== "*") await learnTotal(res, fd, file, state, Number(range[2]));
    return true;
  }
  if (res.status === 200) {
    if (state.pos > 0) await restart(fd, file, state);
    const length = Number(res.headers.get("content-length"));
    if (Number.isSafeInteger(length) && length > 0 && !res.headers.get("content-encoding")) await learnTotal(res, fd, file, state, length);
    return true;
  }
  await res.body?.cancel();
  const whole = /^bytes \*\/(\d+)$/.exec(res.headers.get("content-range") ?? "");
  if (res.status === 416 && whole && Number(whole[1]) === state.pos) {
    state.total = state.pos;
    return false;
  }
  if (res.status === 206 || res.status === 416) {
    // A range other than the one asked: the file is fetched whole on the next attempt.
    await restart(fd, file, state);
    throw new TransferError(`the host answered ${res.status} with another range than the one asked`, true);
  }
  throw new TransferError(
    `${new URL(res.url || "http://host").host} answered ${res.status} ${res.statusText}`.trim(),
    res.status === 429 || res.status >= 500,
  );
}

/** The size the host gives now; a file whose size changed since it was announced is fetched again from its start. */
async function learnTotal(res: Response, fd: FileHandle, file: string, state: State, total: number): Promise<void> {
  if (state.total === 0 || total === state.total) {
    state.total = total;
    return;
  }
  const announced = state.total;
  await res.body?.cancel();
  await restart(fd, file, state);
  state.total = total;
  throw new TransferError(`the file on the host changed (${total} bytes where ${announced} were announced)`, true);
}

/** Back to an empty file: the record goes first, so it never describes bytes that are no longer those it synced. */
async function restart(fd: FileHandle, file: string, state: State): Promise<void> {
  await rm(file + RECORD_SUFFIX, { force: true });
  await fd.truncate(0);
  state.pos = state.synced = 0;
  state.hash = createHash("sha256");
}

/** The data on disk first, then the record that moves the resume point to it (written whole, by a rename). */
async function sync(fd: FileHandle, file: string, src: RemoteFile, state: State): Promise<void> {
  if (state.pos === state.synced) return;
  await fd.datasync();
  const record: ResumeRecord = {
    size: state.total || null,
    sha256: src.sha256 ?? null,
    version: src.version ?? null,
    synced: state.pos,
  };
  const tmp = `${file}${RECORD_SUFFIX}.tmp`;
  const h = await open(tmp, "w");
  try {
    await h.writeFile(JSON.stringify(record));
    await h.datasync();
  } finally {
    await h.close();
  }
  await rename(tmp, file + RECORD_SUFFIX);
  state.synced = state.pos;
  state.syncedAt = Date.now();
}

async function writeAll(fd: FileHandle, piece: Uint8Array, at: number): Promise<void> {
  for (let done = 0; done < piece.length; ) {
    const { bytesWritten } = await fd.write(piece, done, piece.length - done, at + done);
    if (bytesWritten <= 0) throw new TransferError("the disk took no bytes", false);
    done += bytesWritten;
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

const why = (err: unknown): string => {
  const e = err as Error & { cause?: NodeJS.ErrnoException };
  return (e.cause?.code ?? e.cause?.message ?? e.message ?? String(err)).split("\n")[0].slice(0, 200);
};
