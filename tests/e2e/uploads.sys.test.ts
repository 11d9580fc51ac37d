// The Uploads API through the real service and both official clients: the Python client's upload_file_chunked and
// openai-node's uploads and parts, on a file larger than one part; the file that results runs as a batch; what
// cannot be is refused in OpenAI's shapes; the objects pass the Python client's runtime types.
import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pythonWithOpenAI } from "../../testkit/python.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { completionJsonl } from "../../testkit/workload.js";
import { openaiClient, startTestService, type TestService, waitForBatch } from "../helpers/service.js";

let svc: TestService;
let dir: string;
const python = pythonWithOpenAI();
if (!python) console.warn("the Python client's upload test is skipped: no Python with the openai package (.venv/bin/pip install openai)");

beforeAll(async () => {
  svc = await startTestService();
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-uploads-"));
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

const content = completionJsonl(60, { prefix: "up", maxTokens: 2 });

async function contentOf(fileId: string): Promise<string> {
  return (await (await fetch(`${svc.baseUrl}/v1/files/${fileId}/content`)).text()) as string;
}

describe("the Uploads API", () => {
  it("takes a file in parts with openai-node, completes it into a File that runs as a batch", async () => {
    const client = openaiClient(svc);
    const bytes = Buffer.from(content);
    const upload = await client.uploads.create({
      bytes: bytes.length,
      filename: "big.jsonl",
      mime_type: "application/jsonl",
      purpose: "batch",
    });
    expect(upload).toMatchObject({ object: "upload", status: "pending", bytes: bytes.length, filename: "big.jsonl", purpose: "batch" });
    expect(upload.expires_at - upload.created_at).toBe(3600);
    const third = Math.ceil(bytes.length / 3);
    const parts = [];
    for (let i = 0; i < 3; i++)
      parts.push(await client.uploads.parts.create(upload.id, { data: await toFile(bytes.subarray(i * third, (i + 1) * third), "part") }));
    expect(parts[0]).toMatchObject({ object: "upload.part", upload_id: upload.id });
    // The parts join in the order given: the wrong order is still the declared size, and a different file.
    const done = await client.uploads.complete(upload.id, { part_ids: parts.map((p) => p.id) });
    expect(done.status).toBe("completed");
    expect(done.file).toMatchObject({ object: "file", purpose: "batch", bytes: bytes.length, filename: "big.jsonl" });
    expect(await contentOf(done.file!.id)).toBe(content);
    const batch = await client.batches.create({ input_file_id: done.file!.id, endpoint: "/v1/completions", completion_window: "24h" });
    expect((await waitForBatch(svc.baseUrl, batch.id)).request_counts).toMatchObject({ completed: 60, failed: 0, total: 60 });
    const again = await client.uploads.complete(upload.id, { part_ids: parts.map((p) => p.id) }).catch((e) => e);
    expect(again.status).toBe(400);
    expect(again.error).toMatchObject({ code: "upload_not_pending" });
  });

  it("a complete sent twice at once, or with a cancel, makes one file and one ending", async () => {
    const client = openaiClient(svc);
    const bytes = Buffer.from(content);
    const files = async () => (await client.files.list({ limit: 10_000 })).data.filter((f) => f.filename === "race.jsonl").length;
    const before = await files();
    let completed = 0;
    for (const rival of ["complete", "cancel"] as const) {
      const u = await client.uploads.create({
        bytes: bytes.length,
        filename: "race.jsonl",
        mime_type: "application/jsonl",
        purpose: "batch",
      });
      const p = await client.uploads.parts.create(u.id, { data: await toFile(bytes, "part") });
      const done = () => client.uploads.complete(u.id, { part_ids: [p.id] });
      const settled = await Promise.allSettled([done(), rival === "complete" ? done() : client.uploads.cancel(u.id)]);
      const won = settled
        .filter((r) => r.status === "fulfilled")
        .map((r) => (r as PromiseFulfilledResult<{ status: string }>).value.status);
      // The first to arrive ends it; the other is refused as the upload is no longer pending.
      expect(won).toHaveLength(1);
      const lost = settled.find((r) => r.status === "rejected") as PromiseRejectedResult;
      expect(lost.reason.error).toMatchObject({ code: "upload_not_pending" });
      if (rival === "complete") expect(won[0]).toBe("completed");
      if (won[0] === "completed") completed++;
    }
    // A file for each upload that ended completed, and none for one a cancel ended.
    expect((await files()) - before).toBe(completed);
  });

  it("refuses what cannot be, in OpenAI's shapes", async () => {
    const client = openaiClient(svc);
    const err = async (p: Promise<unknown>): Promise<any> => p.catch((e) => e);
    expect(
      (await err(client.uploads.create({ bytes: 10, filename: "a.pdf", mime_type: "application/pdf", purpose: "assistants" }))).error,
    ).toMatchObject({ code: "unsupported_value", param: "purpose" });
    expect(
      (await err(client.uploads.create({ bytes: 10 ** 12, filename: "a.jsonl", mime_type: "application/jsonl", purpose: "batch" }))).error,
    ).toMatchObject({ code: "file_too_large", param: "bytes" });
    // A batch file is JSONL: a MIME type that says otherwise is refused, not taken and ignored.
    for (const mime_type of ["image/png", "application/pdf", "video/mp4"])
      expect((await err(client.uploads.create({ bytes: 10, filename: "a.jsonl", mime_type, purpose: "batch" }))).error).toMatchObject({
        code: "unsupported_value",
        param: "mime_type",
      });
    for (const mime_type of ["application/jsonl", "text/plain; charset=utf-8", "application/json", "application/octet-stream"])
      expect(await client.uploads.create({ bytes: 10, filename: "a.jsonl", mime_type, purpose: "batch" })).toMatchObject({
        status: "pending",
      });
    const u = await client.uploads.create({ bytes: 100, filename: "a.jsonl", mime_type: "application/jsonl", purpose: "batch" });
    const p = await client.uploads.parts.create(u.id, { data: await toFile(Buffer.from("x".repeat(40)), "p") });
    expect((await err(client.uploads.complete(u.id, { part_ids: [p.id] }))).error).toMatchObject({ param: "part_ids" });
    expect((await err(client.uploads.complete(u.id, { part_ids: ["part_000000000000000000000000"] }))).error).toMatchObject({
      param: "part_ids",
    });
    expect(await client.uploads.cancel(u.id)).toMatchObject({ status: "cancelled" });
    expect((await err(client.uploads.parts.create(u.id, { data: await toFile(Buffer.from("x"), "p") }))).status).toBe(400);
    expect((await err(client.uploads.cancel("upload_000000000000000000000000"))).status).toBe(404);
    const unknown = await fetch(`${svc.baseUrl}/v1/uploads`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ bytes: 1, filename: "a", mime_type: "x", purpose: "batch", colour: "red" }),
    });
    expect(unknown.status).toBe(400);
    expect((await unknown.json()).error.message).toMatch(/colour/);
  });

  it.skipIf(!python)("takes a file from the Python client's upload_file_chunked, larger than one part", async () => {
    const file = path.join(dir, "requests.jsonl");
    writeFileSync(file, content);
    const script = `
import json, sys
from openai import OpenAI
c = OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0)
u = c.uploads.upload_file_chunked(file=sys.argv[2], mime_type="application/jsonl", purpose="batch", part_size=1000)
print(json.dumps(u.model_dump()))
`;
    // Asynchronously: the service answering it runs in this process.
    const { stdout: out } = await promisify(execFile)(python!, ["-c", script, svc.baseUrl, file], { encoding: "utf8" });
    const upload = JSON.parse(out.trim().split("\n").pop()!);
    expect(content.length).toBeGreaterThan(3000);
    expect(upload).toMatchObject({ status: "completed", bytes: content.length, filename: "requests.jsonl" });
    expect(await contentOf(upload.file.id)).toBe(readFileSync(file, "utf8"));
    // The Upload and its File pass the Python client's runtime types.
    const check = spawnSync(python!, [path.join(repoRoot, "tests/conformance/validate.py")], {
      input: JSON.stringify({ upload: [upload], file: [upload.file] }),
      encoding: "utf8",
    });
    expect(check.stdout.trim()).toBe("");
    expect(check.status).toBe(0);
  });
});
