// The bench's names for testkit's batch client (upload, create, poll; shared with the tests and chaos), plus a tail
// of the batch's output file that dates every result line as it lands (the per-request latencies).
import { open } from "node:fs/promises";
import { type BatchView, createBatch as create, getBatch, isFinal, pollBatch, uploadFile } from "../testkit/batch-client.js";

export type Batch = BatchView;
export { getBatch, uploadFile };

/** Creates the batch, or throws with the answer when it is refused. */
export async function createBatch(baseUrl: string, fileId: string, endpoint = "/v1/completions"): Promise<Batch> {
  const { status, body } = await create(baseUrl, fileId, { endpoint });
  if (status !== 200) throw new Error(`HTTP ${status}: ${JSON.stringify(body)}`);
  return body as Batch;
}

/** Polls every `everyMs` until the batch ends. */
export const waitForBatch = (baseUrl: string, id: string, everyMs: number, timeoutMs = 30 * 60_000): Promise<Batch> =>
  pollBatch(baseUrl, id, isFinal, { everyMs, timeoutMs });

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
