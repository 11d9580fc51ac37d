// The checker's client: batches submitted and read back over plain HTTP through whichever API server answers, as a
// user's client retries against a load balancer while processes die around it.
import { completionLines, createBatch, fileLines, getBatch, isFinal, uploadText } from "../testkit/batch-client.js";
import { type BatchView, checkBatch, type ResultLine, type Verdict } from "./checker.js";

/** `n` completions lines with custom_ids `${prefix}-0`... (a story prompt each, a few tokens). */
export const batchLines = (n: number, prefix: string, maxTokens: number) => completionLines(n, prefix, { maxTokens });

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

/** Waits for the batch's final status, then reads its files and judges it. */
export async function judge(bases: () => string[], id: string, ids: string[], timeoutMs: number): Promise<Verdict> {
  const until = Date.now() + timeoutMs;
  let b: BatchView & { output_file_id?: string | null; error_file_id?: string | null };
  for (;;) {
    b = await anyServer(bases, (base) => getBatch(base, id, { signal: AbortSignal.timeout(5_000) }), timeoutMs);
    if (isFinal(b)) break;
    if (Date.now() > until)
      return { batch: id, lost: ids.length, duplicated: 0, mismatches: [`still ${b.status} after ${timeoutMs / 1000} s`] };
    await new Promise((r) => setTimeout(r, 500));
  }
  const read = (fileId: string | null | undefined) =>
    anyServer(bases, (base) => fileLines(base, fileId, { signal: AbortSignal.timeout(30_000) }) as Promise<ResultLine[]>, 60_000);
  const v = checkBatch(b, ids, await read(b.output_file_id), await read(b.error_file_id));
  if (b.status !== "completed") v.mismatches.push(`ended ${b.status}`);
  return v;
}
