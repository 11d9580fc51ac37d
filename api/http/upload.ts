// Multipart uploads stream straight to a temp file under BATCH_DIR; a file is never held in memory.
// The temp dir sits on the same file system as the store, so FileStore.adopt can rename instead of copy.
import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import type { RequestHandler } from "express";
import multer, { MulterError } from "multer";
import { badRequest } from "../errors.js";

export function uploadDir(batchDir: string): string {
  return path.join(batchDir, "files", ".uploads");
}

/**
 * Accepts one file part named `file` plus a few small text fields. Past `maxFileBytes` multer stops
 * with LIMIT_FILE_SIZE (413 in the error handler) and deletes the partial file itself.
 */
export function acceptUpload(opts: { batchDir: string; maxFileBytes: number }): RequestHandler {
  const dir = uploadDir(opts.batchDir);
  const storage = multer.diskStorage({
    // Created on demand: BATCH_DIR may have been emptied while the server runs.
    destination: (_req, _file, cb) => {
      mkdir(dir, { recursive: true }).then(() => cb(null, dir), (err: Error) => cb(err, dir));
    },
  });
  const accept = multer({
    storage,
    limits: { fileSize: opts.maxFileBytes, files: 1, fields: 8, fieldSize: 4096, parts: 10 },
    // Browsers and openai-node send UTF-8 file names without declaring a charset.
    defParamCharset: "utf8",
  }).single("file");
  return (req, res, next) => {
    accept(req, res, (err?: unknown) => next(err == null ? undefined : asClientError(err)));
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
