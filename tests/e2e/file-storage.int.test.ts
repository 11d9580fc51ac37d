// A key's bound on its stored file bytes, through the real HTTP surface of an in-process service with a keys file:
// uploads past it are refused as OpenAI refuses an organization past its storage (400, no param), another key is
// not held by it, a deleted file gives its bytes back, and the Uploads API is checked by the bytes it declares.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeKeysFile } from "../helpers/keys.js";
import { startTestService, type TestService } from "../helpers/service.js";

const LIMIT = 3_000;
const dir = mkdtempSync(path.join(os.tmpdir(), "obi-file-storage-"));
const { file, auth } = writeKeysFile(dir, [
  { id: "teamA", fileStorageBytes: LIMIT },
  { id: "teamB", fileStorageBytes: LIMIT },
]);

let svc: TestService;
const client = (id: string) =>
  new OpenAI({ baseURL: `${svc.baseUrl}/v1`, apiKey: auth[id].authorization.slice("Bearer ".length), maxRetries: 0 });
beforeAll(async () => {
  svc = await startTestService({ KEYS_FILE: file });
}, 120_000);
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A JSONL file of exactly `bytes` bytes. */
const jsonl = (bytes: number) => {
  const line = JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/completions", body: { prompt: "" } });
  return `${line.slice(0, -3)}${"x".repeat(bytes - line.length - 1)}"}}\n`;
};
const upload = async (id: string, bytes: number) =>
  client(id)
    .files.create({ file: await toFile(Buffer.from(jsonl(bytes)), "in.jsonl"), purpose: "batch" })
    .catch((e) => e);

describe("a key's file storage", () => {
  it("refuses an upload past the key's bound, and counts a deleted file no more", async () => {
    const kept = [];
    for (let i = 0; i < 3; i++) kept.push(await upload("teamA", 1_000));
    expect(kept.map((f) => f.bytes)).toEqual([1_000, 1_000, 1_000]);

    const refused = await upload("teamA", 1_000);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused.status).toBe(400);
    expect(refused.error).toMatchObject({ type: "invalid_request_error", code: "storage_quota_exceeded", param: null });
    expect(refused.message).toContain("exceeded your file storage quota");
    expect(refused.message).toContain("3,000 bytes");
    // Nothing of it is kept.
    const listed = await client("teamA").files.list();
    expect(listed.data).toHaveLength(3);

    // Another key has its own bound.
    expect((await upload("teamB", 2_500)).bytes).toBe(2_500);

    await client("teamA").files.delete(kept[0].id);
    expect((await upload("teamA", 1_000)).bytes).toBe(1_000);
    expect(await upload("teamA", 100)).toBeInstanceOf(OpenAI.BadRequestError);
  }, 60_000);

  it("checks an upload of the Uploads API by the bytes it declares", async () => {
    const refused = await client("teamB")
      .uploads.create({ bytes: 1_000, filename: "in.jsonl", mime_type: "application/jsonl", purpose: "batch" })
      .catch((e) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused.error).toMatchObject({ code: "storage_quota_exceeded", param: null });
    const fits = await client("teamB").uploads.create({
      bytes: 500,
      filename: "in.jsonl",
      mime_type: "application/jsonl",
      purpose: "batch",
    });
    expect(fits.status).toBe("pending");
  }, 60_000);
});
