// The BlobStore port's contract, run against each implementation: the filesystem store, and the S3 store on a
// real S3 protocol server (s3rver on 127.0.0.1, a dev dependency). Contents by key: moved in, streamed out with
// their size, removed; keys that would leave the store's root are refused.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { buffer, text } from "node:stream/consumers";
import type { S3ClientConfig } from "@aws-sdk/client-s3";
import S3rver from "s3rver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BlobStore } from "../../stores/blob-store.js";
import { FsBlobStore } from "../../stores/fs-blob-store.js";
import { S3BlobStore } from "../../stores/s3-blob-store.js";

const root = mkdtempSync(path.join(os.tmpdir(), "obi-blobs-"));
let s3server: S3rver;
let s3: S3BlobStore;
let client: S3ClientConfig;
beforeAll(async () => {
  s3server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    silent: true,
    directory: path.join(root, "s3"),
    configureBuckets: [{ name: "obi", configs: [] }],
  });
  const { port } = (await s3server.run()) as AddressInfo;
  client = {
    endpoint: `http://127.0.0.1:${port}`,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
  };
  s3 = new S3BlobStore({ bucket: "obi", prefix: "deploy-1/", client });
});
afterAll(async () => {
  s3?.close();
  await s3server?.close();
  rmSync(root, { recursive: true, force: true });
});

const stores: Array<[string, () => BlobStore]> = [
  ["FsBlobStore", () => new FsBlobStore(path.join(root, "fs"))],
  ["S3BlobStore (s3rver)", () => s3],
];

describe.each(stores)("%s", (_name, store) => {
  it("moves a file in under its key, streams it out with its size, and removes it", async () => {
    const blobs = store();
    const tmp = path.join(root, `upload-${Math.random().toString(36).slice(2)}.tmp`);
    const content = `${JSON.stringify({ a: 1, text: "x".repeat(5000) })}\n`.repeat(300);
    writeFileSync(tmp, content);
    expect(await blobs.putFile("files/file-1.jsonl", tmp)).toBe(Buffer.byteLength(content));
    expect(existsSync(tmp)).toBe(false);
    const blob = await blobs.open("files/file-1.jsonl");
    expect(blob?.size).toBe(Buffer.byteLength(content));
    expect(await text(blob!.content)).toBe(content);
    expect(await blobs.size("files/file-1.jsonl")).toBe(Buffer.byteLength(content));
    await blobs.delete("files/file-1.jsonl");
    expect(await blobs.open("files/file-1.jsonl")).toBeUndefined();
    expect(await blobs.size("files/file-1.jsonl")).toBeUndefined();
    // Deleting what is not there is not an error.
    await blobs.delete("files/file-1.jsonl");
  });

  it("copies content under a second key without reading it through; the copy outlives the original", async () => {
    const blobs = store();
    const content = "one\ntwo\n";
    await blobs.put("files/src.jsonl", Readable.from([Buffer.from(content)]));
    expect(await blobs.copy("files/src.jsonl", "batch_1/input.jsonl")).toBe(content.length);
    await blobs.delete("files/src.jsonl");
    expect(await text((await blobs.open("batch_1/input.jsonl"))!.content)).toBe(content);
    expect(await blobs.copy("files/src.jsonl", "batch_2/input.jsonl")).toBeUndefined();
    expect(await blobs.size("batch_2/input.jsonl")).toBeUndefined();
    await blobs.deletePrefix("batch_1/");
  });

  it("stores a stream, replaces it, and reads byte ranges of it", async () => {
    const blobs = store();
    const content = Array.from({ length: 2000 }, (_, i) => `line ${i} ${"é".repeat(i % 7)}\n`).join("");
    const bytes = Buffer.from(content);
    expect(await blobs.put("parts/a.jsonl", Readable.from([Buffer.from("old")]))).toBe(3);
    expect(await blobs.put("parts/a.jsonl", Readable.from([bytes.subarray(0, 1000), bytes.subarray(1000)]))).toBe(bytes.length);
    for (const [start, end] of [
      [0, 10],
      [1000, 5001],
      [bytes.length - 5, bytes.length],
      [7, 7],
    ]) {
      const part = await blobs.open("parts/a.jsonl", { start, end });
      expect(part?.size, `${start}-${end}`).toBe(end - start);
      expect(Buffer.from(await buffer(part!.content)).equals(bytes.subarray(start, end))).toBe(true);
    }
    expect(await blobs.open("parts/missing.jsonl", { start: 0, end: 5 })).toBeUndefined();
    await blobs.delete("parts/a.jsonl");
  });

  it("deletes everything under a prefix, and only that", async () => {
    const blobs = store();
    for (const key of ["b/x/shards/0/1.jsonl", "b/x/shards/1/2.jsonl", "b/x/output.jsonl", "b/xy/shards/0/1.jsonl"])
      await blobs.put(key, Readable.from([Buffer.from(key)]));
    expect((await blobs.list("b/x/")).sort()).toEqual(["b/x/output.jsonl", "b/x/shards/0/1.jsonl", "b/x/shards/1/2.jsonl"]);
    expect(await blobs.list("b/nothing/")).toEqual([]);
    expect(await blobs.deletePrefix("b/x/shards/")).toBe(2);
    expect(await blobs.size("b/x/shards/0/1.jsonl")).toBeUndefined();
    expect(await blobs.size("b/x/output.jsonl")).toBe("b/x/output.jsonl".length);
    expect(await blobs.size("b/xy/shards/0/1.jsonl")).toBeDefined();
    expect(await blobs.deletePrefix("b/nothing/")).toBe(0);
    await expect(blobs.deletePrefix("b/x")).rejects.toThrow(/must end with/);
  });

  it("refuses keys that would leave the store's root", async () => {
    for (const key of ["", "../etc/passwd", "/etc/passwd", "a/../../b", "a//b"])
      await expect(store().size(key), key).rejects.toThrow(/invalid blob key/);
  });
});

describe("S3BlobStore.ensureBucket", () => {
  it("creates a missing bucket once and leaves an existing one", async () => {
    const fresh = new S3BlobStore({ bucket: "made-at-start", client });
    try {
      expect(await fresh.ensureBucket()).toBe("created");
      expect(await fresh.ensureBucket()).toBe("exists");
      expect(await s3.ensureBucket()).toBe("exists");
    } finally {
      fresh.close();
    }
  });
});

describe("FsBlobStore", () => {
  it("names a file below its root by its key", () => {
    const blobs = new FsBlobStore(root);
    expect(blobs.keyOf(path.join(root, "batch_x", "output.jsonl"))).toBe("batch_x/output.jsonl");
    expect(() => blobs.keyOf("/elsewhere/output.jsonl")).toThrow(/invalid blob key/);
  });
});
