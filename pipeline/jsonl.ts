// Streaming JSONL: a line reader that never holds the whole file, and an append-only line writer.
import { once } from "node:events";
import { createReadStream, createWriteStream, fdatasync, type WriteStream } from "node:fs";
import type { Readable } from "node:stream";

export interface JsonlLine {
  /** 1-based. */
  lineNo: number;
  /** The line without its "\n" / "\r\n" terminator; "" when `tooLong`. */
  text: string;
  /** UTF-8 bytes of the line without its terminator (counted in full even when `tooLong`). */
  bytes: number;
  /** Set when the line passed `maxLineBytes`: its text was dropped instead of buffered. */
  tooLong?: true;
  /** Where the line's raw bytes lie in the source, terminator and BOM aside: [start, end). For reading it again. */
  start: number;
  end: number;
}

export interface ReadJsonlOptions {
  /** Lines longer than this are yielded as `tooLong` with no text; memory stays bounded. */
  maxLineBytes?: number;
  /** Read chunk size (default 64 KiB). */
  chunkBytes?: number;
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * Yields every line of a file (its path, or a stream of its bytes) in order. A missing final newline still yields the last line;
 * the empty string after a final newline is not a line. A UTF-8 BOM on line 1 is dropped.
 * Lines are split on raw bytes before decoding, so a multi-byte character cut by a chunk
 * boundary is decoded whole.
 */
export async function* readJsonlLines(source: string | Readable, opts: ReadJsonlOptions = {}): AsyncGenerator<JsonlLine> {
  const maxLineBytes = opts.maxLineBytes ?? Number.POSITIVE_INFINITY;
  const stream = typeof source === "string" ? createReadStream(source, { highWaterMark: opts.chunkBytes ?? 64 * 1024 }) : source;
  // Pieces of the line that started in an earlier chunk.
  let pieces: Buffer[] = [];
  let pendingBytes = 0;
  let overflow = false;
  // Last byte of the dropped part of an overlong line: its "\r" may sit just before a "\n" in the next chunk.
  let lastByte = -1;
  let lineNo = 0;
  // Source bytes before the current line.
  let position = 0;

  const finish = (tail: Buffer): JsonlLine => {
    lineNo++;
    let bytes = pendingBytes + tail.length;
    const start = position;
    const end = start + bytes;
    position = end + 1;
    if (overflow) {
      // A dropped line may still have had its "\r" in the tail.
      if (tail.length > 0 && tail[tail.length - 1] === CR) bytes--;
      else if (tail.length === 0 && lastByte === CR) bytes--;
      pieces = [];
      pendingBytes = 0;
      overflow = false;
      return { lineNo, text: "", bytes, tooLong: true, start, end };
    }
    let buf = pieces.length === 0 ? tail : Buffer.concat([...pieces, tail], bytes);
    pieces = [];
    pendingBytes = 0;
    if (buf.length > 0 && buf[buf.length - 1] === CR) buf = buf.subarray(0, buf.length - 1);
    if (lineNo === 1 && buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) buf = buf.subarray(3);
    if (buf.length > maxLineBytes) return { lineNo, text: "", bytes: buf.length, tooLong: true, start, end };
    return { lineNo, text: buf.toString("utf8"), bytes: buf.length, start, end };
  };

  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      let start = 0;
      for (;;) {
        const nl = chunk.indexOf(LF, start);
        if (nl === -1) break;
        yield finish(chunk.subarray(start, nl));
        start = nl + 1;
      }
      if (start < chunk.length) {
        const rest = chunk.subarray(start);
        pendingBytes += rest.length;
        // +1 leaves room for a "\r" that belongs to the terminator.
        if (overflow || pendingBytes > maxLineBytes + 1) {
          overflow = true;
          pieces = [];
          lastByte = rest[rest.length - 1];
        } else {
          pieces.push(rest);
        }
      }
    }
    if (pendingBytes > 0) yield finish(Buffer.alloc(0));
  } finally {
    stream.destroy();
  }
}

export interface JsonlAppender {
  /** Resolves once the line is handed to the stream and, if it was full, after it drained. */
  append(value: unknown): Promise<void>;
  /** Resolves once every line appended before the call is written and on stable storage (fdatasync). */
  sync(): Promise<void>;
  /** Flushes everything appended and closes the file. */
  close(): Promise<void>;
}

/** Appended text handed to the file as soon as it reaches this many characters, else at the end of the turn. */
const BATCH_CHARS = 1 << 18;

/**
 * Opens `path` for appending (created if missing). Every value becomes one `JSON.stringify(value) + "\n"`, and the
 * lines appended in one turn of the event loop are handed to the file together, in one write: lines written one
 * by one cost a re-run answered from the cache a tenth of its time in small buffers and callbacks. A crash can
 * still tear at most the last line (see resume.ts repairTornTail).
 */
export async function openJsonlAppender(path: string): Promise<JsonlAppender> {
  const stream: WriteStream = createWriteStream(path, { flags: "a", highWaterMark: 1 << 20 });
  // Lines appended, and lines the file has (their write done): a sync waits for the second to reach the first as
  // it was when the sync began.
  let issued = 0;
  let written = 0;
  const waiters: Array<{ upTo: number; done: () => void }> = [];
  const onWritten = (lines: number) => {
    written += lines;
    for (let i = waiters.length - 1; i >= 0; i--)
      if (waiters[i].upTo <= written) {
        waiters[i].done();
        waiters.splice(i, 1);
      }
  };

  let failure: Error | undefined;
  stream.on("error", (err) => {
    failure ??= err;
    // A sync waiting for lines that will never be written hears of the failure instead.
    for (const w of waiters.splice(0)) w.done();
  });
  await once(stream, "open");
  let closed = false;
  // Shared by every append that finds the stream full, so waiting writers add one listener, not one each.
  let draining: Promise<void> | undefined;
  // The lines appended since the last hand-over, and whether one is due at the end of this turn.
  let batch = "";
  let batchLines = 0;
  let due = false;
  const handOver = () => {
    due = false;
    if (batchLines === 0 || failure) return;
    const lines = batchLines;
    stream.write(batch, () => onWritten(lines));
    batch = "";
    batchLines = 0;
  };
  return {
    async append(value) {
      if (failure) throw failure;
      if (closed) throw new Error(`JSONL appender for ${path} is closed`);
      const line = JSON.stringify(value);
      if (line === undefined) throw new TypeError("cannot append a value that JSON cannot represent");
      issued++;
      batch += `${line}\n`;
      batchLines++;
      if (batch.length >= BATCH_CHARS) handOver();
      else if (!due) {
        due = true;
        setImmediate(handOver);
      }
      if (stream.writableNeedDrain) {
        draining ??= drained(stream).finally(() => (draining = undefined));
        await draining;
      }
      if (failure) throw failure;
    },
    async sync() {
      const upTo = issued;
      handOver();
      if (written < upTo && !failure) await new Promise<void>((done) => waiters.push({ upTo, done }));
      if (failure) throw failure;
      const fd = (stream as unknown as { fd: number }).fd;
      await new Promise<void>((done, fail) => fdatasync(fd, (err) => (err ? fail(err) : done())));
    },
    async close() {
      if (closed) return;
      handOver();
      closed = true;
      if (!stream.destroyed) {
        const done = once(stream, "close");
        stream.end();
        await done.catch(() => undefined);
      }
      if (failure) throw failure;
    },
  };
}

/** Waits for "drain", or for "close" (a failed stream is destroyed and never drains). */
function drained(stream: WriteStream): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off("drain", done);
      stream.off("close", done);
      resolve();
    };
    stream.on("drain", done);
    stream.on("close", done);
  });
}

/**
 * The complete JSON lines of a file that may be growing (its path, or a stream of its bytes as a blob store hands
 * them over, read as they arrive with no copy made): while a batch runs, its last line may be half written; a
 * line that does not parse is that torn tail and is left for the next read. Blank lines are skipped.
 */
export async function* readCompleteJsonLines(source: string | Readable): AsyncGenerator<string> {
  for await (const line of readJsonlLines(source)) if (isJsonLine(line.text)) yield line.text;
}

/** A line that parses as JSON (not blank, not torn). */
export function isJsonLine(text: string): boolean {
  if (text.trim() === "") return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
