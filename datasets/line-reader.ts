// Lines of a file read back by byte range, in an order close to the file's but not equal to it: a batch's answers,
// written as they finished (costliest first, so rows of a few lengths interleave), read back in input order. A few
// windows read ahead serve the runs of lines that follow each other in each region; while windows serve one line
// apiece, a line costs one read of its own bytes, so an order that jumps about never reads more than it needs.
import { closeSync, openSync, readSync } from "node:fs";

const WINDOW = 1 << 19;
/** How far a window reaches back before the line it is read for: answers finish a little out of order. */
const BEHIND = 1 << 15;
const WINDOWS = 8;

interface Window {
  start: number;
  bytes: Buffer;
  used: number;
  served: number;
}

export class LineReader {
  private readonly fd: number;
  private readonly windows: Window[] = [];
  private tick = 0;
  /** Lines served by windows read ahead, and windows read: reading ahead pays while the first is well above the second. */
  private hits = 0;
  private reads = 0;

  constructor(file: string) {
    this.fd = openSync(file, "r");
  }

  /** The bytes [start, start + length) as text. */
  read(start: number, length: number): string {
    this.tick++;
    for (const w of this.windows) {
      const at = start - w.start;
      if (at >= 0 && at + length <= w.bytes.length) {
        w.used = this.tick;
        w.served++;
        this.hits++;
        return w.bytes.toString("utf8", at, at + length);
      }
    }
    // Windows pay when each serves a few lines; a scattered order reads each line alone.
    const ahead = this.reads < WINDOWS || this.hits >= this.reads;
    if (!ahead) {
      const buf = Buffer.allocUnsafe(length);
      readSync(this.fd, buf, 0, length, start);
      this.hits = Math.max(0, this.hits - 1);
      this.reads = Math.max(0, this.reads - 1);
      return buf.toString("utf8");
    }
    const from = Math.max(0, start - BEHIND);
    const buf = Buffer.allocUnsafe(WINDOW + length);
    const got = readSync(this.fd, buf, 0, buf.length, from);
    const w: Window = { start: from, bytes: buf.subarray(0, got), used: this.tick, served: 1 };
    if (this.windows.length < WINDOWS) this.windows.push(w);
    else {
      const oldest = this.windows.reduce((a, b) => (a.used <= b.used ? a : b));
      this.windows[this.windows.indexOf(oldest)] = w;
    }
    this.reads++;
    return w.bytes.toString("utf8", start - from, start - from + length);
  }

  close(): void {
    closeSync(this.fd);
  }
}
