// Splitting a validated batch file into shards of whole lines by byte range, so each worker reads only its own
// part of the input (a ranged read of the object) and no line is cut.
import { createReadStream } from "node:fs";

export interface ShardPlan {
  /** Byte range of the input, end exclusive. */
  byteStart: number;
  byteEnd: number;
  /** Requests (non-blank lines) in the range. */
  total: number;
  /** The model its lines run on, where a batch's lines name several; else the batch's. */
  model?: string;
}

/**
 * Shards of lines already grouped by model (each group's lines together, in `groups`' order): a shard never spans
 * two models, so each runs on its own model's workers.
 */
export function planModelShards(groups: Array<{ model: string; lines: string[] }>, linesPerShard: number): ShardPlan[] {
  const shards: ShardPlan[] = [];
  let offset = 0;
  for (const { model, lines } of groups)
    for (let i = 0; i < lines.length; i += linesPerShard) {
      const slice = lines.slice(i, i + linesPerShard);
      const bytes = slice.reduce((n, l) => n + Buffer.byteLength(l), 0);
      shards.push({ byteStart: offset, byteEnd: offset + bytes, total: slice.length, model });
      offset += bytes;
    }
  return shards;
}

const LF = 0x0a;
/** Space, tab and CR: a line of only these is blank. */
const isBlankByte = (b: number) => b === 0x20 || b === 0x09 || b === 0x0d;

/** The whole file as one shard, from its requests and bytes as validation counted them (no pass needed). */
export const oneShard = (known: { total: number; bytes: number }): ShardPlan => ({
  byteStart: 0,
  byteEnd: known.bytes,
  total: known.total,
});

/** One streaming pass: a shard ends after every `linesPerShard` requests; trailing blank lines stay in the last. */
export async function planShards(path: string, linesPerShard: number): Promise<ShardPlan[]> {
  const shards: ShardPlan[] = [];
  let offset = 0;
  let shardStart = 0;
  let inShard = 0;
  let lineHasText = false;
  const endLine = (end: number) => {
    if (lineHasText) inShard++;
    lineHasText = false;
    if (inShard === linesPerShard) {
      shards.push({ byteStart: shardStart, byteEnd: end, total: inShard });
      shardStart = end;
      inShard = 0;
    }
  };
  for await (const chunk of createReadStream(path, { highWaterMark: 256 * 1024 }) as AsyncIterable<Buffer>) {
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i];
      if (b === LF) endLine(offset + i + 1);
      else if (!lineHasText && !isBlankByte(b)) lineHasText = true;
    }
    offset += chunk.length;
  }
  if (lineHasText) inShard++;
  if (inShard > 0) shards.push({ byteStart: shardStart, byteEnd: offset, total: inShard });
  else if (shards.length > 0) shards[shards.length - 1].byteEnd = offset;
  return shards;
}
