// The checker's client: batches submitted and read back over plain HTTP through whichever API server answers, as a
// user's client retries against a load balancer while processes die around it.
import { createBatch, fileLines, getBatch, isFinal, outputSince, uploadText } from "../testkit/batch-client.js";
import { completionJsonl, customIds } from "../testkit/workload.js";
import { type BatchView, checkBatch, checkRead, type ResultLine, type Verdict } from "./checker.js";

/** `n` completions lines with custom_ids `${prefix}-0`... (a story prompt each, a few tokens). */
export const batchLines = (n: number, prefix: string, maxTokens: number) => ({
  text: completionJsonl(n, { prefix, maxTokens }),
  ids: customIds(prefix, n),
});

/** Tries each server in turn, again and again, until one answers (a 503 or no answer moves on). */
async function anyServer<T>(bases: () => string[], call: (base: string) => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    for (const base of bases()) {
      const got = await call(base).catch(() => undefined);
      if (got !== undefined) return got;
    }
    if (Date.now() > until) throw new Error("no API server answered in time");
    await new Promise((r) => setTimeout(r, 500));
  }
}

export async function submit(bases: () => string[], text: string): Promise<string> {
  const fileId = await anyServer(
    bases,
    (base) => uploadText(base, text, { filename: "chaos.jsonl", signal: AbortSignal.timeout(10_000) }).then((f) => f.id),
    60_000,
  );
  return anyServer(
    bases,
    async (base) => {
      const { status, body } = await createBatch(base, fileId, { signal: AbortSignal.timeout(10_000) });
      return status === 200 ? (body.id as string) : undefined;
    },
    60_000,
  );
}

/** A reader of a batch's output while it runs, as a user follows a long job: each read after the lines it has. */
export interface Follower {
  /** Stops, reads what is left once the batch has ended, and gives every line read. */
  finish(): Promise<string[]>;
  /** Lines read while the batch ran (from answers given before it ended). */
  readonly early: number;
}

/** Reads the batch's output every 300 ms through whichever server answers (one that does not is skipped). */
export function follow(bases: () => string[], id: string): Follower {
  const lines: string[] = [];
  let stopped = false;
  let turn = 0;
  /** Lines read from answers given while the batch had not ended. */
  let early = 0;
  const readOnce = async () => {
    const all = bases();
    const base = all[turn++ % all.length];
    let running = false;
    const status = (s: string) => (running = !isFinal({ status: s }));
    const got = await outputSince(base, id, lines.length, { signal: AbortSignal.timeout(5_000), status }).catch(() => undefined);
    if (got) lines.push(...got);
    if (got && running) early = lines.length;
    return got;
  };
  const loop = (async () => {
    while (!stopped) {
      await readOnce();
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  return {
    get early() {
      return early;
    },
    async finish() {
      stopped = true;
      await loop;
      await anyServer(bases, async () => ((await readOnce()) ? true : undefined), 60_000);
      return lines;
    },
  };
}

/**
 * Waits for the batch's final status, then reads its files and judges it (with `follower`, also what it read while
 * the batch ran: the output file, line for line).
 */
export async function judge(bases: () => string[], id: string, ids: string[], timeoutMs: number, follower?: Follower): Promise<Verdict> {
  const until = Date.now() + timeoutMs;
  let b: BatchView & { output_file_id?: string | null; error_file_id?: string | null };
  for (;;) {
    b = await anyServer(bases, (base) => getBatch(base, id, { signal: AbortSignal.timeout(5_000) }), timeoutMs);
    if (isFinal(b)) break;
    if (Date.now() > until) {
      void follower?.finish().catch(() => undefined);
      return { batch: id, lost: ids.length, duplicated: 0, mismatches: [`still ${b.status} after ${timeoutMs / 1000} s`] };
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  const read = (fileId: string | null | undefined) =>
    anyServer(bases, (base) => fileLines(base, fileId, { signal: AbortSignal.timeout(30_000) }) as Promise<ResultLine[]>, 60_000);
  const output = await read(b.output_file_id);
  const v = checkBatch(b, ids, output, await read(b.error_file_id));
  if (b.status !== "completed") v.mismatches.push(`ended ${b.status}`);
  if (follower) {
    const got = await follower.finish();
    v.readEarly = follower.early;
    const file = output.map((l) => JSON.stringify(l));
    v.mismatches.push(
      ...checkRead(
        got.map((l) => JSON.stringify(JSON.parse(l))),
        file,
      ),
    );
    if (got.length !== file.length) v.mismatches.push(`read ${got.length} output lines in all, the file has ${file.length}`);
  }
  return v;
}
