// An upload's parts against its declared bytes and its key's storage bound, over a real folder blob store and a clock
// the test moves: a part past the declared bytes is refused, the parts of open uploads count against the bound, and
// an upload never completed stops counting when its hour is up, its parts removed by the collect.
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { FileRecords } from "../../state/ports.js";
import { FsBlobStore } from "../../stores/fs-blob-store.js";
import { StorageQuota } from "../../tenancy/storage-quota.js";
import { BlobUploads, UPLOAD_SECONDS } from "../../uploads/uploads.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("obi-uploads-quota");
const LIMIT = 1_000;

async function setup() {
  const root = path.dirname(await scratch.file());
  const blobs = new FsBlobStore(path.join(root, "blobs"));
  let now = 1_000_000;
  // The key has no file: what it holds is its uploads' parts alone.
  const files = { list: async () => ({ data: [], has_more: false }) } as unknown as FileRecords;
  const quota = new StorageQuota({ files, limitOf: (owner) => (owner === "team" ? LIMIT : undefined) });
  const uploads = new BlobUploads({ blobs, files, scratchDir: path.join(root, "scratch"), maxFileBytes: 10_000, now: () => now, quota });
  const create = (bytes: number) =>
    uploads.create({ filename: "a.jsonl", purpose: "batch", bytes, mime_type: "application/jsonl", owner: "team" });
  const part = async (id: string, bytes: number) =>
    uploads.addPart(id, "team", await scratch.write(Buffer.alloc(bytes, "x"))).catch((e) => e);
  return { blobs, uploads, quota, create, part, later: (s: number) => (now += s) };
}

describe("an upload's parts", () => {
  it("are refused past the upload's declared bytes and past the key's bound, and stop counting once it expires", async () => {
    const { blobs, uploads, quota, create, part, later } = await setup();
    const a = await create(800);
    const b = await create(400);
    expect(await part(a.id, 900)).toMatchObject({ code: "upload_too_large", param: "data" });
    expect((await part(a.id, 700)).object).toBe("upload.part");
    // 700 of the key's 1,000 bytes are held by a's parts.
    expect(await part(b.id, 401)).toMatchObject({ code: "upload_too_large" });
    expect(await part(b.id, 400)).toMatchObject({ code: "storage_quota_exceeded", param: null });
    await expect(quota.within("team", 301, async () => "stored")).rejects.toMatchObject({ code: "storage_quota_exceeded" });
    expect(await quota.within("team", 300, async () => "stored")).toBe("stored");

    // An hour on, a was never completed: it takes no more parts, holds no more room, and the collect removes it.
    later(UPLOAD_SECONDS);
    expect(await part(a.id, 100)).toMatchObject({ code: "upload_not_pending" });
    expect(await quota.within("team", 1_000, async () => "stored")).toBe("stored");
    expect((await blobs.list(`uploads/${a.id}/`)).length).toBeGreaterThan(0);
    expect(await uploads.collect()).toBe(2);
    expect(await blobs.list("uploads/")).toEqual([]);
  });
});
