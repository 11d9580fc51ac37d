// The filesystem BlobStore: contents by key below its root, moved in, streamed out, removed; keys that would
// leave the root are refused.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { text } from "node:stream/consumers";
import { afterAll, describe, expect, it } from "vitest";
import { FsBlobStore } from "../../api/stores/fs-blob-store.js";

const root = mkdtempSync(path.join(os.tmpdir(), "obi-blobs-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("FsBlobStore", () => {
  it("moves a file in under its key, streams it out with its size, and removes it", async () => {
    const blobs = new FsBlobStore(root);
    const tmp = path.join(root, "upload.tmp");
    writeFileSync(tmp, '{"a":1}\n');
    expect(await blobs.putFile("files/file-1.jsonl", tmp)).toBe(8);
    expect(existsSync(tmp)).toBe(false);
    expect(readFileSync(path.join(root, "files/file-1.jsonl"), "utf8")).toBe('{"a":1}\n');
    const blob = await blobs.open("files/file-1.jsonl");
    expect(blob?.size).toBe(8);
    expect(await text(blob!.content)).toBe('{"a":1}\n');
    expect(await blobs.size("files/file-1.jsonl")).toBe(8);
    await blobs.delete("files/file-1.jsonl");
    expect(await blobs.open("files/file-1.jsonl")).toBeUndefined();
    expect(await blobs.size("files/file-1.jsonl")).toBeUndefined();
    await blobs.delete("files/file-1.jsonl");
  });

  it("names a file below the root by its key, and refuses keys that would leave it", () => {
    const blobs = new FsBlobStore(root);
    expect(blobs.keyOf(path.join(root, "batch_x", "output.jsonl"))).toBe("batch_x/output.jsonl");
    for (const key of ["", "../etc/passwd", "/etc/passwd", "a/../../b", "a//b"])
      expect(() => blobs.localPath(key), key).toThrow(/invalid blob key/);
    expect(() => blobs.keyOf("/elsewhere/output.jsonl")).toThrow(/invalid blob key/);
  });
});
