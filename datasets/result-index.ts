// Where each row's result line lies in a batch's output and error files: one pass over their bytes, a megabyte at
// a time, each line's custom_id read from the few bytes after its key. An embedding's line is mostly its vector, so
// decoding whole lines to find the id was a third of the join.
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";

export interface Located {
  /** Byte start and length of each row's result line, and which file (even: an output file, odd: an error file). */
  start: Float64Array;
  length: Uint32Array;
  file: Uint8Array;
}

/** No result line for the row (yet). */
export const NONE = 255;

const LF = 0x0a;
const KEY = Buffer.from('"custom_id"');
/** The key's value as a JSON string literal, from the bytes just after the key. */
const VALUE = /^\s*:\s*("(?:[^"\\]|\\.)*")/;
/** Bytes after the key first decoded to find the value; a longer id decodes the rest of its line. */
const HEAD = 256;

/** Where each row's result line is (`rowOf` names a line's row); later lines of a row (a retry's) win over earlier ones. */
export async function locate(files: string[], rows: number, rowOf: (id: string) => number | undefined): Promise<Located> {
  const at: Located = { start: new Float64Array(rows + 1), length: new Uint32Array(rows + 1), file: new Uint8Array(rows + 1).fill(NONE) };
  for (const [k, f] of files.entries()) {
    if (!(await stat(f).catch(() => null))) continue;
    await eachLine(f, (buf, s, e, position) => {
      const id = idIn(buf, s, e);
      const n = id === undefined ? undefined : rowOf(id);
      if (n === undefined || n < 1 || n > rows) return;
      at.start[n] = position;
      at.length[n] = e - s;
      at.file[n] = k;
    });
  }
  return at;
}

/** Calls `line` with each line's bytes as `buf[s, e)` (terminator aside) and its place in the file. */
async function eachLine(file: string, line: (buf: Buffer, s: number, e: number, position: number) => void): Promise<void> {
  // The pieces of a line the chunks before cut (joined once its end comes), and where it lies in the file.
  let carry: Buffer[] = [];
  let position = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    let s = 0;
    if (carry.length > 0) {
      // Only the cut line is copied whole: copying each chunk onto its tail cost more than the rest of the pass.
      const nl = chunk.indexOf(LF);
      if (nl === -1) {
        carry.push(chunk);
        continue;
      }
      const whole = Buffer.concat([...carry, chunk.subarray(0, nl)]);
      line(whole, 0, whole.length, position);
      position += whole.length + 1;
      carry = [];
      s = nl + 1;
    }
    for (let nl = chunk.indexOf(LF, s); nl !== -1; nl = chunk.indexOf(LF, s)) {
      line(chunk, s, nl, position);
      position += nl + 1 - s;
      s = nl + 1;
    }
    if (s < chunk.length) carry.push(chunk.subarray(s));
  }
  if (carry.length > 0) {
    const whole = Buffer.concat(carry);
    line(whole, 0, whole.length, position);
  }
}

function idIn(buf: Buffer, s: number, e: number): string | undefined {
  // Searched within the line: a file of lines without the key must not be searched to its end from each line.
  const k = buf.subarray(s, e).indexOf(KEY);
  if (k === -1) return undefined;
  const from = s + k + KEY.length;
  const value = VALUE.exec(buf.toString("utf8", from, Math.min(e, from + HEAD))) ?? VALUE.exec(buf.toString("utf8", from, e));
  if (!value) return undefined;
  try {
    return JSON.parse(value[1]) as string;
  } catch {
    return undefined;
  }
}
