// A plain HTTP client of the Batch API (upload, create, poll), timing each step, plus a tail of the
// batch's output file that dates every result line as it lands (the per-request latencies).
import { openAsBlob } from "node:fs";
import { open } from "node:fs/promises";
import path from "node:path";

const FINAL = new Set(["completed", "failed", "expired", "cancelled"]);

export interface Batch {
  id: string;
  status: string;
  request_counts: { total: number; completed: number; failed: number };
  usage?: { input_tokens: number; output_tokens: number; input_tokens_details?: { cached_tokens: number } };
  errors?: unknown;
  output_file_id?: string | null;
  error_file_id?: string | null;
}

async function json<T>(res: Response): Promise<T> {
  const body = await res.json();
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${JSON.stringify(body)}`);
  return body as T;
}

export async function uploadFile(baseUrl: string, file: string): Promise<string> {
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", await openAsBlob(file), path.basename(file));
  const res = await fetch(`${baseUrl}/v1/files`, { method: "POST", body: form });
  return (await json<{ id: string }>(res)).id;
}

export async function createBatch(baseUrl: string, fileId: string, endpoint = "/v1/completions"): Promise<Batch> {
  const res = await fetch(`${baseUrl}/v1/batches`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input_file_id: fileId, endpoint, completion_window: "24h" }),
  });
  return json<Batch>(res);
}

export async function getBatch(baseUrl: string, id: string): Promise<Batch> {
  return json<Batch>(await fetch(`${baseUrl}/v1/batches/${id}`));
}

export async function waitForBatch(baseUrl: string, id: string, everyMs: number, timeoutMs = 30 * 60_000): Promise<Batch> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const batch = await getBatch(baseUrl, id);
    if (FINAL.has(batch.status)) return batch;
    if (Date.now() > deadline) throw new Error(`batch ${id} still ${batch.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Watches a growing JSONL file and records, for every complete line, the time (performance.now())
 * at which it was first seen. Resolution is `everyMs`.
 */
export function tailLineTimes(file: string, everyMs = 20) {
  const times: number[] = [];
  let offset = 0;
  let reading = false;
  const buf = Buffer.alloc(1 << 20);
  const read = async () => {
    if (reading) return;
    reading = true;
    try {
      const fh = await open(file, "r").catch(() => undefined);
      if (!fh) return;
      try {
        for (;;) {
          const { bytesRead } = await fh.read(buf, 0, buf.length, offset);
          if (bytesRead === 0) break;
          const now = performance.now();
          // Count newlines only; a partial last line is counted when its newline arrives.
          let last = -1;
          for (let i = buf.indexOf(10, 0); i !== -1 && i < bytesRead; i = buf.indexOf(10, i + 1)) {
            times.push(now);
            last = i;
          }
          if (last === -1) break;
          offset += last + 1;
        }
      } finally {
        await fh.close();
      }
    } finally {
      reading = false;
    }
  };
  const timer = setInterval(() => void read(), everyMs);
  return {
    async stop(): Promise<number[]> {
      clearInterval(timer);
      while (reading) await new Promise((r) => setTimeout(r, 5));
      await read();
      return times;
    },
  };
}
