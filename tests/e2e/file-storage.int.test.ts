// A key's bound on its stored file bytes, through the real HTTP surface of an in-process service with a keys file:
// uploads past it are refused as OpenAI refuses an organization past its storage (400, no param), another key is
// not held by it, a deleted file gives its bytes back, the Uploads API is checked by the bytes it declares and by
// each part, and every other way bytes are stored for a key (inline, Anthropic and dataset batches) is held to it.
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
  { id: "teamC", fileStorageBytes: LIMIT },
  { id: "teamD", fileStorageBytes: LIMIT },
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

const post = async (id: string, route: string, body: unknown) => {
  const res = await fetch(`${svc.baseUrl}${route}`, {
    method: "POST",
    headers: { ...auth[id], "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
};
const fileBytes = async (id: string) => (await client(id).files.list()).data.reduce((n, f) => n + f.bytes, 0);
const quotaError = { type: "invalid_request_error", code: "storage_quota_exceeded", param: null };

describe("bytes stored for a key other than by an upload", () => {
  it("refuses an inline batch, an Anthropic message batch and a dataset batch whose lines would pass the bound", async () => {
    const model = (await client("teamC").models.list()).data[0].id;
    const prompts = Array.from({ length: 30 }, (_, i) => ({ prompt: `${i} ${"words ".repeat(20)}` }));
    const inline = await post("teamC", "/v1/batches", { model, input: prompts, max_tokens: 1, completion_window: "24h" });
    expect(inline.status).toBe(400);
    expect(inline.body.error).toMatchObject(quotaError);
    const messages = Array.from({ length: 30 }, (_, i) => ({
      custom_id: `m${i}`,
      params: { model, max_tokens: 1, messages: [{ role: "user", content: "words ".repeat(20) }] },
    }));
    const anthropic = await post("teamC", "/v1/messages/batches", { requests: messages });
    expect(anthropic.status).toBe(400);
    expect(anthropic.body.error).toMatchObject({ type: "invalid_request_error" });
    expect(anthropic.body.error.message).toContain("exceeded your file storage quota");
    expect(await fileBytes("teamC")).toBe(0);

    const csv = `id,text\n${Array.from({ length: 20 }, (_, i) => `${i},t${i}`).join("\n")}\n`;
    const table = await client("teamC").files.create({ file: await toFile(Buffer.from(csv), "t.csv"), purpose: "batch" });
    const dataset = await post("teamC", "/v1/dataset_batches", {
      input_file_id: table.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      job: { prompt: `${"words ".repeat(20)}{{text}}`, params: { max_tokens: 1 } },
    });
    expect(dataset.status).toBe(400);
    expect(dataset.body.error).toMatchObject(quotaError);
    // Neither the rendered lines nor the job's file is kept: only the table the key uploaded.
    expect((await client("teamC").files.list()).data.map((f) => f.id)).toEqual([table.id]);

    // What fits is taken, and counted.
    const small = await post("teamC", "/v1/batches", { model, input: [{ prompt: "a" }], max_tokens: 1, completion_window: "24h" });
    expect(small.status, JSON.stringify(small.body)).toBe(200);
    expect(await fileBytes("teamC")).toBeGreaterThan(table.bytes);
  }, 60_000);
});

describe("an upload's parts", () => {
  const part = async (id: string, uploadId: string, bytes: number) => {
    const form = new FormData();
    form.append("data", new Blob([Buffer.alloc(bytes, "x")]), "part");
    const res = await fetch(`${svc.baseUrl}/v1/uploads/${uploadId}/parts`, { method: "POST", headers: auth[id], body: form });
    return { status: res.status, body: (await res.json()) as any };
  };
  const create = (bytes: number) =>
    client("teamD").uploads.create({ bytes, filename: "in.jsonl", mime_type: "application/jsonl", purpose: "batch" });

  it("refuses a part past the bytes the upload declared, and counts its parts against the key's bound", async () => {
    const small = await create(100);
    const over = await part("teamD", small.id, 200);
    expect(over.status).toBe(400);
    expect(over.body.error).toMatchObject({ code: "upload_too_large", param: "data" });
    expect(over.body.error.message).toContain("created for 100");

    const big = await create(2_500);
    expect((await part("teamD", big.id, 2_000)).status).toBe(200);
    // 2,000 bytes of parts are held: a file of 1,500 more passes the bound of 3,000.
    const refused = await upload("teamD", 1_500);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused.error).toMatchObject(quotaError);
    const last = await part("teamD", big.id, 500);
    expect(last.status).toBe(200);
    const parts = [(await part("teamD", small.id, 100)).body.id];
    expect(parts[0]).toMatch(/^part_/);
    expect((await part("teamD", big.id, 1)).body.error).toMatchObject({ code: "upload_too_large" });

    // Cancelled, an upload's parts count no more.
    await client("teamD").uploads.cancel(small.id);
    expect((await upload("teamD", 400)).bytes).toBe(400);
    expect(await upload("teamD", 200)).toBeInstanceOf(OpenAI.BadRequestError);
  }, 60_000);
});
