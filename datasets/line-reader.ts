// Lines of a file read back by byte range, in an order close to the file's but not equal to it (a batch's answers
// read in input order): a window read ahead serves the lines that follow each other, and a line away from the
// window costs one read of its own bytes, so an order that jumps about never reads more than it needs.
import { closeSync, openSync, readSync } from "node:fs";

const WINDOW = 1 << 20;
/** How far a window reaches back before the line it is read for: answers finish a little out of order. */
const BEHIND = 1 << 17;

export class LineReader {
  private readonly fd: number;
  private window = Buffer.alloc(0);
  private windowStart = 0;
  /** Whether the last window served more than the line it was read for: reading ahead pays here. */
  private sequential = true;
  private served = 0;

  constructor(file: string) {
    this.fd = openSync(file, "r");
  }

  /** The bytes [start, start + length) as text. */
  read(start: number, length: number): string {
    const offset = start - this.windowStart;
    if (offset >= 0 && offset + length <= this.window.length) {
      this.served++;
      return this.window.toString("utf8", offset, offset + length);
    }
    this.sequential = this.served > 1 || this.window.length === 0;
    const from = this.sequential ? Math.max(0, start - BEHIND) : start;
    const size = this.sequential ? WINDOW + length : length;
    const buf = Buffer.allocUnsafe(size);
    const got = readSync(this.fd, buf, 0, size, from);
    this.window = buf.subarray(0, got);
    this.windowStart = from;
    this.served = 1;
    return this.window.toString("utf8", start - from, start - from + length);
  }

  close(): void {
    closeSync(this.fd);
  }
}
