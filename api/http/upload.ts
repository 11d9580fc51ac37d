// Multipart uploads stream straight to a temp file under BATCH_DIR; a file is never held in memory.
// The temp dir sits on the same file system as the store, so adopting the upload is a rename, not a copy.
import { mkdir, rm } from "node:fs/promises";
import type { Socket } from "node:net";
import type { RequestHandler } from "express";
import multer, { MulterError } from "multer";
import { uploadDir } from "../../stores/fs-blob-store.js";
import { badRequest } from "../errors.js";

/** What an upload's form holds at most besides its file's bytes: one file, a few small fields (purpose, expires_after). */
export const UPLOAD_FORM = { files: 1, fields: 8, fieldNameSize: 100, fieldSize: 4096, parts: 10 } as const;

/**
 * Accepts one file part named `file` plus a few small text fields. The moment the file passes
 * `maxFileBytes` the client gets its 413 and the connection is closed after it: the rest of an
 * oversized body is never waited for. The partial file is deleted at once.
 */
export function acceptUpload(opts: { batchDir: string; maxFileBytes: number; field?: string }): RequestHandler {
  const dir = uploadDir(opts.batchDir);
  const disk = multer.diskStorage({
    // Created on demand: BATCH_DIR may have been emptied while the server runs.
    destination: (_req, _file, cb) => {
      mkdir(dir, { recursive: true }).then(
        () => cb(null, dir),
        (err: Error) => cb(err, dir),
      );
    },
  });
  /** Per request: answers the client as soon as its file is too big (and the partial file is gone). */
  const tooBig = new WeakMap<object, () => void>();
  const storage: multer.StorageEngine = {
    _handleFile(req, file, cb) {
      let over = false;
      file.stream.once("limit", () => {
        over = true;
        // Stops the write now; multer itself would wait for the end of the part, i.e. of the whole body.
        file.stream.destroy();
      });
      disk._handleFile(req, file, (err, info) => {
        const done = () => {
          if (over) tooBig.get(req)?.();
          cb(err, info);
        };
        // On a failed write multer forgets the file, but the disk storage has already created it.
        if (err && file.path) rm(file.path, { force: true }).then(done, done);
        else done();
      });
    },
    _removeFile: (req, file, cb) => disk._removeFile(req, file, cb),
  };
  const accept = multer({
    storage,
    limits: { fileSize: opts.maxFileBytes, ...UPLOAD_FORM },
    // Browsers and openai-node send UTF-8 file names without declaring a charset.
    defParamCharset: "utf8",
  }).single(opts.field ?? "file");
  return (req, res, next) => {
    let settled = false;
    const settle = (err?: unknown) => {
      if (settled) return;
      settled = true;
      tooBig.delete(req);
      next(err == null ? undefined : asClientError(err));
    };
    tooBig.set(req, () => {
      res.setHeader("Connection", "close");
      drainThenClose(req.socket);
      settle(new MulterError("LIMIT_FILE_SIZE", opts.field ?? "file"));
    });
    accept(req, res, settle);
  };
}

/** What is read and thrown away of an oversized body after its 413, at most: then the connection is cut. */
export const DRAIN_LIMIT = { bytes: 16 * 1024 * 1024, ms: 5_000 };

/**
 * After a 413 sent mid-body, Node closes the connection as soon as the answer is written, with the rest of the
 * body unread: the kernel then resets it, and a client still sending may see the reset before it reads the answer.
 * Instead the answer's side is ended (the client reads the 413 and the end), and what the client still sends is
 * read and dropped until it stops, or up to DRAIN_LIMIT, whichever comes first.
 */
function drainThenClose(socket: Socket): void {
  let seen = 0;
  const cut = () => socket.destroy();
  const timer = setTimeout(cut, DRAIN_LIMIT.ms);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
  socket.on("data", (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > DRAIN_LIMIT.bytes) cut();
  });
  // Node calls this once the answer is written; the read side stays open until the client is done.
  socket.destroySoon = () => {
    socket.end();
    socket.resume();
  };
}

/**
 * Busboy reports a malformed body ("Unexpected end of form", "Malformed part header") as a plain
 * Error: that is the client's fault. Disk errors carry an errno code and stay server errors.
 */
function asClientError(err: unknown): unknown {
  if (err instanceof MulterError || !(err instanceof Error) || "code" in err) return err;
  return badRequest(`Invalid multipart body: ${err.message}.`, null, "invalid_multipart");
}

/** Removes an upload that will not be adopted; a file already moved or gone is fine. */
export async function discardUpload(tmpPath: string | undefined): Promise<void> {
  if (tmpPath) await rm(tmpPath, { force: true });
}
