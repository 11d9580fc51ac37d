// The checker's client: batches submitted and read back over plain HTTP through whichever API server answers, as a
// user's client retries against a load balancer while processes die around it.
import { type BatchView, checkBatch, type ResultLine, type Verdict } from "./checker.js";

const FINAL = new Set(["completed", "failed", "expired", "cancelled"]);

/** `n` completions lines with custom_ids `${prefix}-0`... (a story prompt each, a few tokens). */
export function batchLines(n: number, prefix: string, maxTokens: number): { text: string; ids: string[] } {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  const text = ids
    .map((id, i) =>
      JSON.stringify({
        custom_id: id,
        method: "POST",
        url: "/v1/completions",
        body: { prompt: `Once upon a time, ${prefix} ${i}:`, max_tokens: maxTokens, temperature: 0 },
      }),
    )
    .join("\n");
  return { text: `${text}\n`, ids };
}

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
    async (base) => {
      const form = new FormData();
      form.append("purpose", "batch");
      form.append("file", new Blob([text]), "chaos.jsonl");
      const res = await fetch(`${base}/v1/files`, { method: "POST", body: form, signal: AbortSignal.timeout(10_000) });
      return res.ok ? ((await res.json()) as { id: string }).id : undefined;
    },
    60_000,
  );
  return anyServer(
    bases,
    async (base) => {
      const res = await fetch(`${base}/v1/batches`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ input_file_id: fileId, endpoint: "/v1/completions", completion_window: "24h" }),
        signal: AbortSignal.timeout(10_000),
      });
      return res.ok ? ((await res.json()) as { id: string }).id : undefined;
    },
    60_000,
  );
}

/** Waits for the batch's final status, then reads its files and judges it. */
export async function judge(bases: () => string[], id: string, ids: string[], timeoutMs: number): Promise<Verdict> {
  const until = Date.now() + timeoutMs;
  let b: BatchView & { output_file_id?: string | null; error_file_id?: string | null };
  for (;;) {
    b = await anyServer(
      bases,
      async (base) => {
        const res = await fetch(`${base}/v1/batches/${id}`, { signal: AbortSignal.timeout(5_000) });
        return res.ok ? ((await res.json()) as typeof b) : undefined;
      },
      timeoutMs,
    );
    if (FINAL.has(b.status)) break;
    if (Date.now() > until)
      return { batch: id, lost: ids.length, duplicated: 0, mismatches: [`still ${b.status} after ${timeoutMs / 1000} s`] };
    await new Promise((r) => setTimeout(r, 500));
  }
  const read = (fileId: string | null | undefined) =>
    fileId
      ? anyServer(
          bases,
          async (base) => {
            const res = await fetch(`${base}/v1/files/${fileId}/content`, { signal: AbortSignal.timeout(30_000) });
            if (!res.ok) return undefined;
            return (await res.text())
              .split("\n")
              .filter((l) => l.trim())
              .map((l) => JSON.parse(l) as ResultLine);
          },
          60_000,
        )
      : Promise.resolve([] as ResultLine[]);
  const v = checkBatch(b, ids, await read(b.output_file_id), await read(b.error_file_id));
  if (b.status !== "completed") v.mismatches.push(`ended ${b.status}`);
  return v;
}
