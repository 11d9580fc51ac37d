// The one HTTP client of the Batch API that tests, the bench and chaos share (upload, create, read, poll, read a
// file back), and the one polling helper. Plain fetch, so what it sees is what any client sees; the official
// clients are tested on their own (tests/conformance/, tests/e2e/).
import { openAsBlob } from "node:fs";
import path from "node:path";
import { isFinal as isFinalStatus } from "../domain/batch-state.js";
import type { BatchStatus } from "../domain/objects.js";
import { againOnClosedSocket } from "./closed-socket.js";

export type Headers = Record<string, string>;

/** What the clients read of a batch (every field of the wire object is there; these are the ones they use). */
export interface BatchView {
  id: string;
  status: BatchStatus;
  request_counts: { total: number; completed: number; failed: number };
  usage?: { input_tokens: number; output_tokens: number; input_tokens_details?: { cached_tokens: number } };
  errors?: unknown;
  output_file_id?: string | null;
  error_file_id?: string | null;
  [field: string]: any;
}

export const isFinal = (b: { status: string }) => isFinalStatus(b.status as BatchStatus);

/**
 * Calls `probe` every `everyMs` until it gives something other than undefined, and returns that; past `timeoutMs`
 * it throws, saying `what` it waited for and what the probe last saw. With `upToMs`, each wait is half as long again
 * as the last, up to that: for a state that once reached stays (a batch ended), whose long waits would otherwise
 * spend a core on polls.
 */
export async function until<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  opts: { timeoutMs?: number; everyMs?: number; upToMs?: number; seen?: () => unknown } = {},
): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  const first = opts.everyMs ?? 50;
  const longest = Math.max(first, opts.upToMs ?? first);
  for (let every = first; ; every = Math.min(every * 1.5, longest)) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) {
      const seen = opts.seen?.();
      throw new Error(
        `timed out after ${opts.timeoutMs ?? 30_000} ms waiting for ${what}${seen === undefined ? "" : `: ${JSON.stringify(seen)}`}`,
      );
    }
    await new Promise((r) => setTimeout(r, every));
  }
}

async function uploadBlob(baseUrl: string, blob: Blob, filename: string, headers: Headers, signal?: AbortSignal) {
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", blob, filename);
  return fetch(`${baseUrl}/v1/files`, { method: "POST", body: form, headers, signal });
}

/** Uploads `content` as a batch file; throws unless the answer is 200. */
export async function uploadText(
  baseUrl: string,
  content: string,
  opts: { headers?: Headers; filename?: string; signal?: AbortSignal } = {},
): Promise<{ id: string; [field: string]: any }> {
  const res = await uploadBlob(baseUrl, new Blob([content]), opts.filename ?? "input.jsonl", opts.headers ?? {}, opts.signal);
  if (res.status !== 200) throw new Error(`upload answered ${res.status}: ${await res.text()}`);
  return res.json() as Promise<{ id: string }>;
}

/** Uploads a file from disk without reading it into memory first. */
export async function uploadFile(baseUrl: string, file: string, headers: Headers = {}): Promise<string> {
  const res = await uploadBlob(baseUrl, await openAsBlob(file), path.basename(file), headers);
  if (res.status !== 200) throw new Error(`upload of ${file} answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

/** POST /v1/batches; returns the status and body whatever they are. */
export async function createBatch(
  baseUrl: string,
  inputFileId: string,
  opts: { endpoint?: string; headers?: Headers; signal?: AbortSignal } = {},
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${baseUrl}/v1/batches`, {
    method: "POST",
    headers: { "content-type": "application/json", ...opts.headers },
    body: JSON.stringify({ input_file_id: inputFileId, endpoint: opts.endpoint ?? "/v1/completions", completion_window: "24h" }),
    signal: opts.signal,
  });
  return { status: res.status, body: await res.json() };
}

/** GET /v1/batches/{id}; throws unless the answer is 200. */
export async function getBatch(baseUrl: string, id: string, opts: { headers?: Headers; signal?: AbortSignal } = {}): Promise<BatchView> {
  const res = await fetch(`${baseUrl}/v1/batches/${id}`, { headers: opts.headers, signal: opts.signal });
  if (res.status !== 200) throw new Error(`GET batch ${id} answered ${res.status}`);
  return res.json() as Promise<BatchView>;
}

/** Polls the batch until `done` holds for it (by default: a final status). */
export async function pollBatch(
  baseUrl: string,
  id: string,
  done: (b: BatchView) => boolean = isFinal,
  opts: { timeoutMs?: number; everyMs?: number; headers?: Headers } = {},
): Promise<BatchView> {
  let last: BatchView | undefined;
  return until(
    `batch ${id}`,
    async () => {
      last = await getBatch(baseUrl, id, opts);
      return done(last) ? last : undefined;
    },
    { ...opts, seen: () => last },
  );
}

/** A result or input file's JSON lines, read through the API. */
export async function fileLines(
  baseUrl: string,
  fileId: string | null | undefined,
  opts: { headers?: Headers; signal?: AbortSignal } = {},
): Promise<any[]> {
  if (!fileId) return [];
  const res = await fetch(`${baseUrl}/v1/files/${fileId}/content`, { headers: opts.headers, signal: opts.signal });
  if (res.status !== 200) throw new Error(`GET file ${fileId} answered ${res.status}`);
  return (await res.text())
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

/**
 * The batch's output lines committed after the first `after` (GET /v1/batches/{id}/output), as a client keeps
 * them: whole lines only, so an answer cut off by a dying server gives the lines before the cut, and the next read
 * asks after the lines kept.
 */
export async function outputSince(
  baseUrl: string,
  id: string,
  after: number,
  opts: { headers?: Headers; signal?: AbortSignal; limit?: number; status?: (s: string) => void } = {},
): Promise<string[] | undefined> {
  const limit = opts.limit ? `&limit=${opts.limit}` : "";
  const url = `${baseUrl}/v1/batches/${id}/output?after=${after}${limit}`;
  // A GET is sent again once on another connection, as a browser does.
  const res = await againOnClosedSocket(() => fetch(url, { headers: opts.headers, signal: opts.signal }));
  if (res.status !== 200 || !res.body) return undefined;
  opts.status?.(res.headers.get("x-batch-status") ?? "");
  let text = "";
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body) text += decoder.decode(chunk as Uint8Array, { stream: true });
  } catch {
    // Cut off: what arrived whole is kept.
  }
  const whole = text.slice(0, text.lastIndexOf("\n") + 1);
  return whole.split("\n").filter((l) => l !== "");
}
