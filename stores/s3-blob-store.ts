// The BlobStore port on the S3 API (AWS S3, GCS's S3 API, SeaweedFS, Garage, Ceph, MinIO): a key is an object
// under a prefix in one bucket. Content goes in by multipart upload from a local file (lib-storage streams it,
// so memory stays flat whatever its size), comes out as the object's body stream. Only this module knows S3.
import { createReadStream } from "node:fs";
import { rm } from "node:fs/promises";
import { Readable } from "node:stream";
import {
  CopyObjectCommand,
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  NoSuchKey,
  NotFound,
  S3Client,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { checkBlobKey, prefixKey } from "./blob-key.js";
import type { BlobStore, ByteRange } from "./blob-store.js";
import { storageUnavailable } from "./errors.js";

export interface S3BlobStoreOptions {
  bucket: string;
  /** Prepended to every key (e.g. "obi/"), so one bucket can hold several deployments. */
  prefix?: string;
  /** The client's settings: endpoint, region, credentials, forcePathStyle. */
  client: S3ClientConfig;
}

const isMissing = (err: unknown) =>
  err instanceof NoSuchKey ||
  err instanceof NotFound ||
  (err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode === 404;

/** No answer, or the server's own failure: a retry later can succeed. A refusal (4xx) is not this. */
function unreachable(err: unknown): boolean {
  const status = (err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
  if (typeof status === "number") return status >= 500;
  const e = err as { name?: string; code?: string };
  return e?.name === "TimeoutError" || (typeof e?.code === "string" && /^E[A-Z]+/.test(e.code)) || e?.name === "AbortError";
}

/** Every failure of a call: a server that cannot be reached, times out or fails (5xx) is the domain's storage_unavailable. */
const inDomain = (err: unknown) => (unreachable(err) ? storageUnavailable(err) : err);

export class S3BlobStore implements BlobStore {
  private readonly s3: S3Client;
  private readonly prefix: string;

  constructor(private readonly opts: S3BlobStoreOptions) {
    // Checksums only where the API requires them: S3-compatible servers differ in which they accept. A server that
    // stops answering fails the call (connecting bounded, then a socket idle for 30 s) instead of hanging it: the
    // callers retry, and the maintenance must not wait forever on one object.
    this.s3 = new S3Client({
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
      requestHandler: { connectionTimeout: 5_000, socketTimeout: 30_000 },
      ...opts.client,
    });
    this.prefix = opts.prefix ?? "";
  }

  /**
   * Creates the bucket when it does not exist (a fresh SeaweedFS or Garage in compose); one that exists is left
   * as it is. Also checks, at start, that the endpoint and credentials work.
   */
  async ensureBucket(): Promise<"exists" | "created"> {
    try {
      await this.send(new HeadBucketCommand({ Bucket: this.opts.bucket }));
      return "exists";
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
    try {
      await this.send(new CreateBucketCommand({ Bucket: this.opts.bucket }));
    } catch (err) {
      // Another process starting beside this one created it first.
      if ((err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode === 409) return "exists";
      throw err;
    }
    return "created";
  }

  async putFile(key: string, localPath: string): Promise<number> {
    const size = await this.put(key, createReadStream(localPath));
    await rm(localPath, { force: true });
    return size;
  }

  async copy(from: string, to: string): Promise<number | undefined> {
    const size = await this.size(from);
    if (size === undefined) return undefined;
    // URL-encoded, the key's slashes kept (some S3-compatible servers do not decode an encoded one).
    const CopySource = `${this.opts.bucket}/${this.objectKey(from).split("/").map(encodeURIComponent).join("/")}`;
    await this.send(new CopyObjectCommand({ Bucket: this.opts.bucket, Key: this.objectKey(to), CopySource }));
    return size;
  }

  async put(key: string, content: Readable): Promise<number> {
    let size = 0;
    content.on("data", (chunk) => (size += chunk.length));
    await new Upload({ client: this.s3, params: { Bucket: this.opts.bucket, Key: this.objectKey(key), Body: content } })
      .done()
      .catch((err) => {
        throw inDomain(err);
      });
    return size;
  }

  async open(key: string, range?: ByteRange): Promise<{ size: number; content: Readable } | undefined> {
    // An empty range has no HTTP form (bytes=a-b is inclusive): it is an empty stream if the object exists.
    if (range && range.end <= range.start)
      return (await this.size(key)) === undefined ? undefined : { size: 0, content: Readable.from([]) };
    const Range = range && `bytes=${range.start}-${range.end - 1}`;
    try {
      const res = await this.send(new GetObjectCommand({ Bucket: this.opts.bucket, Key: this.objectKey(key), Range }));
      return { size: res.ContentLength ?? 0, content: res.Body as Readable };
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async size(key: string): Promise<number | undefined> {
    try {
      const res = await this.send(new HeadObjectCommand({ Bucket: this.opts.bucket, Key: this.objectKey(key) }));
      return res.ContentLength ?? 0;
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await this.send(new DeleteObjectCommand({ Bucket: this.opts.bucket, Key: this.objectKey(key) }));
  }

  async list(prefix: string): Promise<string[]> {
    const Prefix = `${this.prefix}${prefixKey(prefix)}/`;
    const keys: string[] = [];
    let ContinuationToken: string | undefined;
    do {
      const page = await this.send(new ListObjectsV2Command({ Bucket: this.opts.bucket, Prefix, ContinuationToken }));
      for (const o of page.Contents ?? []) keys.push(o.Key!.slice(this.prefix.length));
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken);
    return keys;
  }

  async deletePrefix(prefix: string): Promise<number> {
    const Prefix = `${this.prefix}${prefixKey(prefix)}/`;
    let deleted = 0;
    let ContinuationToken: string | undefined;
    do {
      const page = await this.send(new ListObjectsV2Command({ Bucket: this.opts.bucket, Prefix, ContinuationToken }));
      // One request per key: DeleteObjects needs a Content-MD5 that not every S3-compatible server checks alike.
      for (const o of page.Contents ?? []) {
        await this.send(new DeleteObjectCommand({ Bucket: this.opts.bucket, Key: o.Key! }));
        deleted++;
      }
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken);
    return deleted;
  }

  async ping(): Promise<void> {
    await this.send(new HeadBucketCommand({ Bucket: this.opts.bucket }));
  }

  close(): void {
    this.s3.destroy();
  }

  private async send(command: { readonly input: object }): Promise<any> {
    try {
      return await this.s3.send(command as Parameters<S3Client["send"]>[0]);
    } catch (err) {
      throw inDomain(err);
    }
  }

  private objectKey(key: string): string {
    return `${this.prefix}${checkBlobKey(key)}`;
  }
}
