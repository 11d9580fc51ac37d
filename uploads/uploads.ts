// OpenAI's Uploads API over the blob store, in either mode: an upload's record and its parts are objects under
// uploads/<id>/ (a folder on one machine, S3 in the distributed mode), so any API server can take any part. Parts
// stream to the store; completing streams them, in the order given, into one file that the file store adopts.
// Memory stays flat whatever the size. An upload is open for an hour; the maintenance removes what is left of it.
import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { InvalidRequestError, NotFoundError } from "../domain/errors.js";
import { newPartId, newUploadId } from "../domain/ids.js";
import type { Upload, UploadPart } from "../domain/objects.js";
import type { ExpiresAfter, Owner, UploadStore } from "../domain/ports.js";
import type { FileRecords } from "../state/ports.js";
import { type BlobStore, concatenated } from "../stores/blob-store.js";
import type { StorageQuota } from "../tenancy/storage-quota.js";

/** OpenAI's: an upload is open for an hour (the route bounds a part to 64 MB while it streams). */
export const UPLOAD_SECONDS = 3600;
const ROOT = "uploads/";

interface UploadRecord {
  upload: Upload;
  owner: Owner;
  expiresAfter?: ExpiresAfter;
}

const recordKey = (id: string) => `${ROOT}${id}/upload.json`;
const partKey = (id: string, part: string) => `${ROOT}${id}/parts/${part}`;

/**
 * The MIME types a JSONL file goes by (OpenAI asks for one "within the supported MIME types for your file
 * purpose"); anything else (an image, a PDF) is no batch file and is refused rather than taken and ignored.
 */
const BATCH_MIME_TYPES = /^(text\/[\w.+-]+|application\/(jsonl|x-jsonl|jsonlines|x-jsonlines|json|x-ndjson|ndjson|octet-stream))$/i;
export const isBatchMimeType = (mime: string) => BATCH_MIME_TYPES.test(mime.split(";")[0].trim());

export interface BlobUploadsDeps {
  blobs: BlobStore;
  files: FileRecords;
  /** Local scratch space for assembling a completed upload. */
  scratchDir: string;
  maxFileBytes: number;
  now: () => number;
  /** The keys' bounds on what is stored for them: an upload's declared bytes, then each part, count against it. */
  quota?: StorageQuota;
}

export class BlobUploads implements UploadStore {
  /**
   * The change under way on each upload in this process: a complete and a cancel (or a complete sent twice, a
   * client retrying one that is still assembling) take turns, so one upload never makes two files or ends
   * both completed and cancelled. Across API servers the record is a blob with no conditional write: the
   * README says so.
   */
  private readonly changing = new Map<string, Promise<unknown>>();

  constructor(private readonly deps: BlobUploadsDeps) {
    if (deps.quota) deps.quota.partsOf = (owner) => this.openPartBytes(owner);
  }

  private inTurn<T>(id: string, change: () => Promise<T>): Promise<T> {
    const before = this.changing.get(id) ?? Promise.resolve();
    const mine = before.catch(() => undefined).then(change);
    this.changing.set(id, mine);
    void mine
      .catch(() => undefined)
      .finally(() => {
        if (this.changing.get(id) === mine) this.changing.delete(id);
      });
    return mine;
  }

  async create(input: Parameters<UploadStore["create"]>[0]): Promise<Upload> {
    if (input.purpose !== "batch")
      throw new InvalidRequestError(`Only purpose 'batch' is served here, not '${input.purpose}'.`, "unsupported_value", "purpose");
    if (!isBatchMimeType(input.mime_type))
      throw new InvalidRequestError(
        `A batch file is JSONL: mime_type '${input.mime_type}' is not one for it (use application/jsonl, a text/ type, application/json, application/x-ndjson or application/octet-stream).`,
        "unsupported_value",
        "mime_type",
      );
    if (input.bytes > this.deps.maxFileBytes)
      throw new InvalidRequestError(
        `The upload of ${input.bytes} bytes is larger than the limit of ${this.deps.maxFileBytes} bytes for a file.`,
        "file_too_large",
        "bytes",
      );
    const now = this.deps.now();
    const upload: Upload = {
      id: newUploadId(),
      object: "upload",
      bytes: input.bytes,
      created_at: now,
      expires_at: now + UPLOAD_SECONDS,
      filename: input.filename,
      purpose: input.purpose,
      status: "pending",
      file: null,
    };
    const write = () => this.write({ upload, owner: input.owner, expiresAfter: input.expiresAfter });
    await (this.deps.quota ? this.deps.quota.within(input.owner, input.bytes, write) : write());
    return upload;
  }

  /**
   * A part is refused when it takes its upload past the bytes the upload declared (its completion could only fail)
   * or its key past its storage bound; one upload's parts take turns, so two at once cannot both pass.
   */
  addPart(id: string, owner: Owner, tmpPath: string): Promise<UploadPart> {
    return this.inTurn(id, async () => {
      const record = await this.pending(id, owner);
      const { size } = await stat(tmpPath);
      const held = await this.partBytes(id);
      if (held + size > record.upload.bytes)
        throw new InvalidRequestError(
          `This part of ${size} bytes would take upload '${id}' to ${held + size} bytes; it was created for ${record.upload.bytes}.`,
          "upload_too_large",
          "data",
        );
      const part = newPartId();
      const put = () => this.deps.blobs.putFile(partKey(id, part), tmpPath);
      await (this.deps.quota ? this.deps.quota.within(owner, size, put) : put());
      return { id: part, object: "upload.part", created_at: this.deps.now(), upload_id: record.upload.id };
    });
  }

  /** The bytes the parts of upload `id` hold. */
  private async partBytes(id: string): Promise<number> {
    const keys = await this.deps.blobs.list(`${ROOT}${id}/parts/`);
    const sizes = await Promise.all(keys.map((k) => this.deps.blobs.size(k)));
    return sizes.reduce((n: number, s) => n + (s ?? 0), 0);
  }

  /** The bytes the parts of `owner`'s uploads still open hold (what its storage bound counts besides its files). */
  private async openPartBytes(owner: Owner): Promise<number> {
    let total = 0;
    for (const key of await this.deps.blobs.list(ROOT)) {
      if (!key.endsWith("/upload.json")) continue;
      const record = await this.read(key.slice(ROOT.length, -"/upload.json".length));
      if (record?.owner !== owner || record.upload.status !== "pending" || record.upload.expires_at <= this.deps.now()) continue;
      total += await this.partBytes(record.upload.id);
    }
    return total;
  }

  complete(id: string, owner: Owner, input: { part_ids: string[]; md5?: string }): Promise<Upload> {
    return this.inTurn(id, () => this.completeNow(id, owner, input));
  }

  private async completeNow(id: string, owner: Owner, input: { part_ids: string[]; md5?: string }): Promise<Upload> {
    const record = await this.pending(id, owner);
    const { blobs, files } = this.deps;
    const sizes = await Promise.all(input.part_ids.map((p) => blobs.size(partKey(id, p))));
    const missing = input.part_ids.find((_, i) => sizes[i] === undefined);
    if (missing !== undefined)
      throw new InvalidRequestError(`No part '${missing}' was added to upload '${id}'.`, "invalid_request", "part_ids");
    if (new Set(input.part_ids).size !== input.part_ids.length)
      throw new InvalidRequestError("part_ids names a part twice.", "invalid_request", "part_ids");
    const total = sizes.reduce((n: number, s) => n + (s ?? 0), 0);
    if (total !== record.upload.bytes)
      throw new InvalidRequestError(
        `The parts hold ${total} bytes; the upload was created for ${record.upload.bytes}.`,
        "invalid_request",
        "part_ids",
      );
    await mkdir(this.deps.scratchDir, { recursive: true });
    const local = path.join(this.deps.scratchDir, `${id}.jsonl`);
    try {
      const md5 = createHash("md5");
      const parts = input.part_ids.map((p) => partKey(id, p));
      const gone = (key: string) => new InvalidRequestError(`Part '${key.split("/").pop()}' is gone.`, "invalid_request", "part_ids");
      await pipeline(concatenated(this.deps.blobs, parts, gone), hashing(md5), createWriteStream(local));
      if (input.md5 && input.md5.toLowerCase() !== md5.digest("hex"))
        throw new InvalidRequestError("The md5 given does not match the parts' bytes.", "invalid_request", "md5");
      const file = await files.adopt({
        tmpPath: local,
        filename: record.upload.filename,
        purpose: "batch",
        owner,
        expiresAfter: record.expiresAfter,
      });
      const upload: Upload = { ...record.upload, status: "completed", file };
      await this.write({ ...record, upload });
      await blobs.deletePrefix(`${ROOT}${id}/parts/`);
      return upload;
    } finally {
      await rm(local, { force: true });
    }
  }

  cancel(id: string, owner: Owner): Promise<Upload> {
    return this.inTurn(id, async () => {
      const record = await this.pending(id, owner);
      const upload: Upload = { ...record.upload, status: "cancelled" };
      await this.write({ ...record, upload });
      await this.deps.blobs.deletePrefix(`${ROOT}${id}/parts/`);
      return upload;
    });
  }

  /** Removes uploads an hour old: their parts, and their records once nothing can ask for them. */
  async collect(now = this.deps.now()): Promise<number> {
    let removed = 0;
    for (const key of await this.deps.blobs.list(ROOT)) {
      if (!key.endsWith("/upload.json")) continue;
      const id = key.slice(ROOT.length, -"/upload.json".length);
      const record = await this.read(id);
      if (record && record.upload.expires_at > now) continue;
      removed++;
      await this.deps.blobs.deletePrefix(`${ROOT}${id}/`);
    }
    return removed;
  }

  /** The owner's upload while it takes parts: not found otherwise, and refused once ended or expired. */
  private async pending(id: string, owner: Owner): Promise<UploadRecord> {
    const record = await this.read(id);
    if (!record || record.owner !== owner) throw new NotFoundError("upload", id);
    if (record.upload.status === "pending" && record.upload.expires_at <= this.deps.now()) {
      record.upload.status = "expired";
      await this.write(record);
    }
    if (record.upload.status !== "pending")
      throw new InvalidRequestError(`Upload '${id}' is ${record.upload.status}: it takes no more changes.`, "upload_not_pending", null);
    return record;
  }

  private async read(id: string): Promise<UploadRecord | undefined> {
    const blob = await this.deps.blobs.open(recordKey(id));
    if (!blob) return undefined;
    const chunks: Buffer[] = [];
    for await (const c of blob.content) chunks.push(c as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as UploadRecord;
  }

  private async write(record: UploadRecord): Promise<void> {
    await this.deps.blobs.put(recordKey(record.upload.id), Readable.from([Buffer.from(JSON.stringify(record))]));
  }
}

function hashing(hash: ReturnType<typeof createHash>): Transform {
  return new Transform({
    transform(chunk, _enc, cb) {
      hash.update(chunk);
      cb(null, chunk);
    },
  });
}
