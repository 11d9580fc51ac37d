// Streaming a body to the client, where a client that hangs up early is normal, not an error.
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { Response } from "express";

export async function streamTo(res: Response, source: Readable | AsyncIterable<string | Buffer>): Promise<void> {
  try {
    await pipeline(source, res);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if ((code === "ERR_STREAM_PREMATURE_CLOSE" || code === "ECONNRESET" || code === "EPIPE") && (res.destroyed || res.req.destroyed))
      return;
    throw err;
  }
}
