// /v1/files through the real app, control plane and stores on a temp BATCH_DIR.
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uploadDir } from "../../stores/fs-blob-store.js";
import { startTestService, type TestService } from "../helpers/service.js";

const MAX_FILE_BYTES = 4096;
let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ MAX_FILE_BYTES: String(MAX_FILE_BYTES) });
});
afterAll(async () => svc?.close());

const app = () => svc.service.app;
const jsonl = (n: number) =>
  `${Array.from({ length: n }, (_, i) => JSON.stringify({ custom_id: `r${i}`, method: "POST", url: "/v1/completions", body: { prompt: `p${i}` } })).join("\n")}\n`;
const upload = (content: string | Buffer, name = "in.jsonl") =>
  request(app()).post("/v1/files").field("purpose", "batch").attach("file", Buffer.from(content), name);
const leftovers = () => (existsSync(uploadDir(svc.batchDir)) ? readdirSync(uploadDir(svc.batchDir)) : []);

describe("POST /v1/files", () => {
  it("stores the upload and answers a FileObject", async () => {
    const content = jsonl(3);
    const res = await upload(content, "requests.jsonl");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: "file", purpose: "batch", filename: "requests.jsonl", bytes: Buffer.byteLength(content) });
    expect(res.body.id).toMatch(/^file-[A-Za-z0-9]+$/);
    expect(res.headers["x-request-id"]).toBeTruthy();
    expect(leftovers()).toEqual([]);
  });

  it("keeps only the base name of a path-like file name", async () => {
    const res = await upload(jsonl(1), "../../etc/evil.jsonl");
    expect(res.status).toBe(200);
    expect(res.body.filename).toBe("evil.jsonl");
  });

  it("refuses a file over MAX_FILE_BYTES with 413 and removes the partial upload", async () => {
    const before = (await request(app()).get("/v1/files")).body.data.length;
    const res = await upload(Buffer.alloc(MAX_FILE_BYTES + 1, "x"));
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", param: "file", code: "file_too_large" });
    expect(leftovers()).toEqual([]);
    expect((await request(app()).get("/v1/files")).body.data.length).toBe(before);
  });

  it("accepts a file of exactly MAX_FILE_BYTES", async () => {
    const res = await upload(Buffer.alloc(MAX_FILE_BYTES, "x"), "edge.jsonl");
    expect(res.status).toBe(200);
    expect(res.body.bytes).toBe(MAX_FILE_BYTES);
  });

  it("needs a file and purpose=batch, and leaves nothing behind when refusing", async () => {
    const noPurpose = await request(app())
      .post("/v1/files")
      .attach("file", Buffer.from(jsonl(1)), "a.jsonl");
    expect(noPurpose.status).toBe(400);
    expect(noPurpose.body.error).toMatchObject({
      param: "purpose",
      code: "missing_required_parameter",
      message: "Missing required parameter: 'purpose'.",
    });
    const wrong = await request(app())
      .post("/v1/files")
      .field("purpose", "fine-tune")
      .attach("file", Buffer.from(jsonl(1)), "a.jsonl");
    expect(wrong.status).toBe(400);
    expect(wrong.body.error.param).toBe("purpose");
    const noFile = await request(app()).post("/v1/files").field("purpose", "batch");
    expect(noFile.status).toBe(400);
    expect(noFile.body.error.param).toBe("file");
    // A JSON body is not an upload: the route takes multipart/form-data only.
    const json = await request(app()).post("/v1/files").send({ purpose: "batch" });
    expect(json.status).toBe(415);
    expect(json.body.error.code).toBe("unsupported_media_type");
    expect(leftovers()).toEqual([]);
  });
});

describe("GET /v1/files", () => {
  it("pages with limit and after, newest first by default", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await upload(jsonl(1), `page${i}.jsonl`)).body.id);
    const all = (await request(app()).get("/v1/files")).body;
    expect(all).toMatchObject({ object: "list", has_more: false });
    const order = all.data.map((f: any) => f.id);
    expect(order).toEqual(expect.arrayContaining(ids));
    // created_at has one-second resolution; within a second the store's order is its own.
    const created = all.data.map((f: any) => f.created_at);
    expect(created).toEqual([...created].sort((a, b) => b - a));
    expect(all.first_id).toBe(order[0]);
    expect(all.last_id).toBe(order.at(-1));

    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = (
        await request(app())
          .get("/v1/files")
          .query({ limit: 2, ...(after ? { after } : {}) })
      ).body;
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((f: any) => f.id));
      if (!page.has_more) break;
      after = page.last_id;
    }
    expect(seen).toEqual(order);

    const asc = (await request(app()).get("/v1/files?order=asc")).body.data.map((f: any) => f.id);
    expect(asc).toEqual([...order].reverse());
  });

  it("rejects a bad limit or order with the param named", async () => {
    expect((await request(app()).get("/v1/files?limit=0")).body.error.param).toBe("limit");
    expect((await request(app()).get("/v1/files?limit=10001")).body.error.param).toBe("limit");
    expect((await request(app()).get("/v1/files?order=sideways")).body.error.param).toBe("order");
  });
});

describe("one file", () => {
  it("retrieves, streams the content as JSONL, deletes", async () => {
    const content = jsonl(5);
    const id = (await upload(content, "five.jsonl")).body.id;
    const got = await request(app()).get(`/v1/files/${id}`);
    expect(got.body).toMatchObject({ id, filename: "five.jsonl" });

    const body = await request(app())
      .get(`/v1/files/${id}/content`)
      .buffer(true)
      .parse((res, cb) => {
        let s = "";
        res.on("data", (c: Buffer) => (s += c.toString()));
        res.on("end", () => cb(null, s));
      });
    expect(body.status).toBe(200);
    expect(body.headers["content-type"]).toMatch(/^application\/jsonl/);
    expect(body.headers["content-disposition"]).toContain("five.jsonl");
    expect(body.body).toBe(content);

    const del = await request(app()).delete(`/v1/files/${id}`);
    expect(del.body).toEqual({ id, object: "file", deleted: true });
    for (const p of [`/v1/files/${id}`, `/v1/files/${id}/content`]) expect((await request(app()).get(p)).status).toBe(404);
    expect((await request(app()).delete(`/v1/files/${id}`)).status).toBe(404);
  });

  it("404s ids of the wrong shape without touching the disk", async () => {
    const outside = path.relative(svc.batchDir, "/etc/passwd");
    for (const p of [
      "/v1/files/..%2F..%2F..%2Fetc%2Fpasswd",
      `/v1/files/${encodeURIComponent(outside)}/content`,
      "/v1/files/file-abc%00.jsonl",
      "/v1/files/file-..",
      "/v1/files/batch_6a1f0c2e9b7d4e3f8a5b1c0d",
      "/v1/files/%2e%2e/content",
    ]) {
      const res = await request(app()).get(p);
      expect(res.status, p).toBe(404);
      expect(res.body.error, p).toMatchObject({ type: "invalid_request_error" });
    }
    expect((await request(app()).delete("/v1/files/..%2Ffiles")).status).toBe(404);
  });
});
