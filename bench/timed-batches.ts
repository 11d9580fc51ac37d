// The bench's names for testkit's batch client (upload, create, poll; shared with the tests and chaos), plus a tail
// of the batch's output file that dates every result line as it lands (the per-request latencies).
import { open } from "node:fs/promises";
import path from "node:path";
import { type BatchView, createBatch as create, getBatch, isFinal, pollBatch, until, uploadFile } from "../testkit/batch-client.js";

export type Batch = BatchView;
export { getBatch, uploadFile };

/** Creates the batch, or throws with the answer when it is refused. */
export async function createBatch(baseUrl: string, fileId: string, endpoint = "/v1/completions"): Promise<Batch> {
  const { status, body } = await create(baseUrl, fileId, { endpoint });
  if (status !== 200) throw new Error(`HTTP ${status}: ${JSON.stringify(body)}`);
  return body as Batch;
}

/** Polls every `poll.everyMs` until the batch ends, for at most `poll.timeoutMs` (30 minutes unless given). */
export const batchEnd = (baseUrl: string, id: string, poll: { everyMs: number; timeoutMs?: number }): Promise<Batch> =>
  pollBatch(baseUrl, id, isFinal, { everyMs: poll.everyMs, timeoutMs: poll.timeoutMs ?? 30 * 60_000 });

/** Where a timed batch's results land on the service's disk (BATCH_DIR/<batch_id>), and how many lines it has. */
export interface ResultFolder {
  folder: string;
  lines: number;
}

/** A poll costs the service and this process about 1.5 ms of CPU between them; a look at a file, microseconds. */
const IDLE_POLL_MS = 1000;

/**
 * Waits for a timed batch to end, as `batchEnd` does, but polls every `everyMs` only once the batch's result
 * files hold all its lines, and once a second before. On a 2-core machine forty polls a second took about 0.5 s
 * of CPU from a 6 s run (uniform 64 x 64 on `small`: 6.48 s against 6.08 s with polls held back), which the
 * peer it is compared with never pays: its client just waits on open requests. `seenAt` (performance.now()) is
 * the poll that saw the batch final, where a clock stops; `outputLineTimes` dates each line of the output file as
 * it landed (the per-request latencies).
 */
export async function waitForTimedBatch(
  baseUrl: string,
  id: string,
  everyMs: number,
  where: ResultFolder,
): Promise<{ batch: Batch; seenAt: number; outputLineTimes: number[] }> {
  const tails = ["output.jsonl", "errors.jsonl"].map((f) => tailLineTimes(path.join(where.folder, f)));
  let asked = Number.NEGATIVE_INFINITY;
  let seenAt = 0;
  let batch: Batch;
  let lineTimes: number[][];
  try {
    batch = await until(
      `batch ${id} to end`,
      async () => {
        const landed = tails.reduce((n, t) => n + t.count(), 0) >= where.lines;
        if (!landed && performance.now() - asked < IDLE_POLL_MS) return undefined;
        asked = performance.now();
        const seen = await getBatch(baseUrl, id);
        seenAt = performance.now();
        return isFinal(seen) ? seen : undefined;
      },
      { everyMs, timeoutMs: 30 * 60_000 },
    );
  } finally {
    lineTimes = await Promise.all(tails.map((t) => t.stop()));
  }
  return { batch, seenAt, outputLineTimes: lineTimes[0] };
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
    /** Lines seen so far. */
    count: () => times.length,
    async stop(): Promise<number[]> {
      clearInterval(timer);
      while (reading) await new Promise((r) => setTimeout(r, 5));
      await read();
      return times;
    },
  };
}
