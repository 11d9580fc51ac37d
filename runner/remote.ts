// http(s) input and output for the runner: GET the batch file to local disk, PUT a result file back.
// Both stream (the file never sits whole in memory) and retry transient failures with backoff.
import { createReadStream, createWriteStream } from "node:fs";
import { stat } from "node:fs/promises";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { TransferError } from "../engine/load/model-transfer.js";

export interface HttpRetry {
  /** Tries in all, the first included. */
  attempts: number;
  baseDelayMs: number;
}

export const DEFAULT_HTTP_RETRY: HttpRetry = { attempts: 5, baseDelayMs: 500 };
const MAX_DELAY_MS = 20_000;

export const isUrl = (location: string): boolean => /^https?:\/\//i.test(location);

/** A URL fit for a log line: a presigned URL's query string carries its signature, so it is left out. */
export function displayLocation(location: string): string {
  if (!isUrl(location)) return location;
  const u = new URL(location);
  return `${u.origin}${u.pathname}${u.search ? "?…" : ""}`;
}

/** Downloads `url` into `file` (replaced on every try); returns its size in bytes. */
export async function download(url: string, file: string, opts: { retry?: HttpRetry; signal?: AbortSignal } = {}): Promise<number> {
  await withRetry(`GET ${displayLocation(url)}`, opts, async () => {
    const res = await fetch(url, { signal: opts.signal });
    if (!res.ok) throw await statusError(res);
    const sink = createWriteStream(file);
    if (res.body) await pipeline(Readable.fromWeb(res.body as import("node:stream/web").ReadableStream), sink);
    else await new Promise<void>((resolve, reject) => sink.end((err?: Error | null) => (err ? reject(err) : resolve())));
  });
  return (await stat(file)).size;
}

/** PUTs `file` to `url` with its length declared (object stores refuse chunked uploads). */
export async function upload(file: string, url: string, opts: { retry?: HttpRetry; signal?: AbortSignal } = {}): Promise<number> {
  const { size } = await stat(file);
  await withRetry(`PUT ${displayLocation(url)}`, opts, async () => {
    const init = {
      method: "PUT",
      body: Readable.toWeb(createReadStream(file)) as ReadableStream,
      headers: { "content-type": "application/jsonl", "content-length": String(size) },
      signal: opts.signal,
      // Required by fetch for a streamed request body.
      duplex: "half",
    };
    const res = await fetch(url, init);
    if (!res.ok) throw await statusError(res);
    await res.body?.cancel();
  });
  return size;
}

async function statusError(res: Response): Promise<TransferError> {
  const text = (await res.text().catch(() => "")).slice(0, 200).trim();
  // 408 and 429 say "later", 5xx says "not my fault": both are worth another try.
  const retryable = res.status === 408 || res.status === 429 || res.status >= 500;
  return new TransferError(`HTTP ${res.status} ${res.statusText}${text ? `: ${text}` : ""}`, retryable);
}

async function withRetry(what: string, opts: { retry?: HttpRetry; signal?: AbortSignal }, run: () => Promise<void>): Promise<void> {
  const retry = opts.retry ?? DEFAULT_HTTP_RETRY;
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      // Network errors (connection refused, reset, DNS) surface as a TypeError from fetch; a local
      // file error (no such directory, no permission) will not go away by trying again.
      const local = typeof (err as { syscall?: unknown })?.syscall === "string" && typeof (err as { path?: unknown }).path === "string";
      const retryable = err instanceof TransferError ? err.retryable : !local && !opts.signal?.aborted;
      const reason = err instanceof TransferError ? err.message : describeNetworkError(err);
      if (!retryable || attempt >= retry.attempts) {
        throw new TransferError(`${what} failed${attempt > 1 ? ` after ${attempt} tries` : ""}: ${reason}`, false);
      }
      const cap = Math.min(MAX_DELAY_MS, retry.baseDelayMs * 2 ** (attempt - 1));
      await sleep(cap / 2 + (Math.random() * cap) / 2, undefined, { signal: opts.signal });
    }
  }
}

function describeNetworkError(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e?.cause?.code ?? e?.cause?.message;
  return `${e?.message ?? String(err)}${cause ? ` (${cause})` : ""}`;
}
