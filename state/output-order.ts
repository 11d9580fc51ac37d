// A batch's output lines in one order that never changes, while it runs and after it ends. Each shard's committed
// output is a prefix of its own lines (its parts in order, or its file run in place); the batch's order is a log
// of [shard, lines of that shard through which] entries, extended (in shard order) by whatever each shard
// committed since, whenever it is read and once more as the batch is finalized, and kept with the batch before it
// is answered. So a reader at line N finds the same first N lines on every read, the final output file included:
// it is assembled in the same order.
import { isJsonLine, readJsonlLines } from "../pipeline/jsonl.js";
import type { BlobStore } from "../stores/blob-store.js";
import type { OrderEntry, OutputOrder, ShardPart } from "./ports.js";

/** A shard's committed object is gone (its batch was finalized meanwhile, and its parts removed). */
export class PartGone extends Error {
  constructor(readonly key: string) {
    super(`a committed result part '${key}' is gone from storage`);
    this.name = "PartGone";
  }
}

export type { OrderEntry, OutputOrder } from "./ports.js";

/** A shard's committed output objects, in its parts' order. */
export const outputKeys = (parts: readonly ShardPart[]): string[] => parts.flatMap((p) => (p.output ? [p.output] : []));

/** What to add to `entries` for the shards' committed output lines now: none when nothing was committed since. */
export function extendOrder(entries: readonly OrderEntry[], shards: ReadonlyArray<{ idx: number; completed: number }>): OrderEntry[] {
  const through = logged(entries);
  const out = entries.map((e) => [...e] as OrderEntry);
  for (const s of [...shards].sort((a, b) => a.idx - b.idx)) {
    if (s.completed <= (through.get(s.idx) ?? 0)) continue;
    const last = out.at(-1);
    // Consecutive lines of one shard are one entry.
    if (last && last[0] === s.idx) last[1] = s.completed;
    else out.push([s.idx, s.completed]);
  }
  return out;
}

/** Lines the order holds. */
export function orderedTotal(entries: readonly OrderEntry[]): number {
  return [...logged(entries).values()].reduce((a, b) => a + b, 0);
}

function logged(entries: readonly OrderEntry[]): Map<number, number> {
  const through = new Map<number, number>();
  for (const [idx, n] of entries) through.set(idx, Math.max(through.get(idx) ?? 0, n));
  return through;
}

/**
 * The order's lines from `after` on (at most `limit`), read from the shards' objects; with `rest`, then each
 * shard's lines past the order (finalizing: whatever a shard holds is in the output once).
 */
export async function* orderedLines(
  blobs: BlobStore,
  order: OutputOrder,
  opts: { after?: number; limit?: number; rest?: boolean } = {},
): AsyncGenerator<string> {
  const after = opts.after ?? 0;
  const end = after + (opts.limit ?? Number.POSITIVE_INFINITY);
  const readers = new Map<number, { lines: AsyncGenerator<string>; read: number }>();
  const reader = (idx: number) => {
    let r = readers.get(idx);
    if (!r) {
      r = { lines: shardLines(blobs, order.keys.get(idx) ?? []), read: 0 };
      readers.set(idx, r);
    }
    return r;
  };
  let at = 0;
  try {
    for (const [idx, through] of order.entries) {
      const r = reader(idx);
      while (r.read < through && at < end) {
        const next = await r.lines.next();
        if (next.done) throw new Error(`shard ${idx} holds ${r.read} committed output lines, fewer than the ${through} counted`);
        r.read++;
        if (at++ >= after) yield next.value;
      }
      if (at >= end) return;
    }
    if (!opts.rest) return;
    // Past the order only in a file run in place, where a torn last line may be: whole lines only.
    for (const idx of [...order.keys.keys()].sort((a, b) => a - b))
      for await (const line of reader(idx).lines) if (isJsonLine(line) && at++ >= after) yield line;
  } finally {
    await Promise.all([...readers.values()].map((r) => r.lines.return(undefined)));
  }
}

/** A shard's lines, as its objects hold them (written whole by the service: a line is not parsed to be passed on). */
async function* shardLines(blobs: BlobStore, keys: readonly string[]): AsyncGenerator<string> {
  for (const key of keys) {
    const blob = await blobs.open(key);
    if (!blob) throw new PartGone(key);
    for await (const line of readJsonlLines(blob.content)) if (line.text.trim() !== "") yield line.text;
  }
}
