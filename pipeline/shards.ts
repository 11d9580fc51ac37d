// Splitting a validated batch file into shards of whole lines by byte range, so each worker reads only its own
// part of the input (a ranged read of the object) and no line is cut.
import { createReadStream } from "node:fs";

export interface ShardPlan {
  /** Byte range of the input, end exclusive. */
  byteStart: number;
  byteEnd: number;
  /** Requests (non-blank lines) in the range. */
  total: number;
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
