// Bad input, one item at a time, against the real service and engine: each gets
// an OpenAI-shaped error with the right status, the server stays up, and nothing stored is harmed.
// (The finer points of each live in tests/api/*; this file is the walk-through.)
import { existsSync, readdirSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uploadDir } from "../../stores/fs-blob-store.js";
import { completionJsonl } from "../../testkit/workload.js";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

const MAX_FILE_BYTES = 64 * 1024;
const MAX_REQUESTS = 5;
const MAX_LINE_BYTES = 1024;

let svc: TestService;
const app = () => svc.service.app;
/** A batch and its file stored before any bad input arrives; they must come out of it untouched. */
const before: { batch?: any; file?: any; output?: string } = {};

beforeAll(async () => {
  svc = await startTestService({
    MAX_FILE_BYTES: String(MAX_FILE_BYTES),
    MAX_REQUESTS_PER_BATCH: String(MAX_REQUESTS),
    MAX_LINE_BYTES: String(MAX_LINE_BYTES),
  });
  before.file = (await upload(completionJsonl(3, { prefix: "kept" }))).body;
  const created = await createBatch({ input_file_id: before.file.id });
  before.batch = await waitForBatch(svc.baseUrl, created.body.id);
  before.output = (await request(app()).get(`/v1/files/${before.batch.output_file_id}/content`)).text;
});
afterAll(async () => svc?.close());

const upload = (content: string | Buffer, name = "in.jsonl") =>
  request(app()).post("/v1/files").field("purpose", "batch").attach("file", Buffer.from(content), name);
const createBatch = (body: Record<string, unknown>) =>
  request(app())
    .post("/v1/batches")
    .send({ endpoint: "/v1/completions", completion_window: "24h", ...body });

/** Exactly OpenAI's error shape, with the status and (when given) the param. */
function expectError(res: { status: number; body: any }, status: number, param?: string | null) {
  expect(res.status).toBe(status);
  expect(Object.keys(res.body)).toEqual(["error"]);
  expect(Object.keys(res.body.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(res.body.error.message).toEqual(expect.any(String));
  if (param !== undefined) expect(res.body.error.param).toBe(param);
}

/** A GET/POST/DELETE sent byte for byte as written: no client normalises the path on the way. */
function raw(method: string, rawPath: string): Promise<{ status: number; body: any }> {
  const { port } = new URL(svc.baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method, path: rawPath }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on("error", reject);
    req.end();
  });
}

const uploadLeftovers = () => (existsSync(uploadDir(svc.batchDir)) ? readdirSync(uploadDir(svc.batchDir)) : []);

describe("bad input, item by item", () => {
  it("malformed JSON body: 400 invalid_json", async () => {
    const res = await request(app()).post("/v1/batches").set("content-type", "application/json").send('{"input_file_id": "file-');
    expectError(res, 400);
    expect(res.body.error.code).toBe("invalid_json");
  });

  it("unknown or deleted input_file_id: 404", async () => {
    expectError(await createBatch({ input_file_id: "file-000000000000000000000000" }), 404, "input_file_id");
    const doomed = (await upload(completionJsonl(1, { prefix: "doomed" }))).body;
    expect((await request(app()).delete(`/v1/files/${doomed.id}`)).status).toBe(200);
    expectError(await createBatch({ input_file_id: doomed.id }), 404, "input_file_id");
  });

  it("unsupported endpoint: 400", async () => {
    for (const endpoint of ["/v1/moderations", "/v1/images/generations", "completions", ""]) {
      expectError(await createBatch({ input_file_id: before.file.id, endpoint }), 400, "endpoint");
    }
  });

  it("bad completion_window: 400 (while 24h, 30m, 2h, 10s are accepted)", async () => {
    for (const completion_window of ["24", "24x", "0h", "-1h", "1.5h", "400d", "tomorrow", ""]) {
      expectError(await createBatch({ input_file_id: before.file.id, completion_window }), 400, "completion_window");
    }
    for (const [completion_window, seconds] of [
      ["30m", 1800],
      ["2h", 7200],
      ["10s", 10],
    ] as const) {
      const ok = await createBatch({ input_file_id: before.file.id, completion_window });
      expect(ok.status).toBe(200);
      expect(ok.body.expires_at - ok.body.created_at).toBe(seconds);
      await waitForBatch(svc.baseUrl, ok.body.id);
    }
  });

  it("limit outside 1-100: 400", async () => {
    for (const limit of ["0", "101", "-1", "abc", "1.5"]) expectError(await request(app()).get(`/v1/batches?limit=${limit}`), 400, "limit");
    expect((await request(app()).get("/v1/batches?limit=100")).status).toBe(200);
    expect((await request(app()).get("/v1/batches?limit=1")).body.data).toHaveLength(1);
  });

  it("metadata over 16 keys, or with oversized keys or values: 400", async () => {
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"]));
    for (const metadata of [many, { note: "x".repeat(513) }, { ["k".repeat(65)]: "v" }, "not-an-object"]) {
      expectError(await createBatch({ input_file_id: before.file.id, metadata }), 400, "metadata");
    }
    expectError(await createBatch({ input_file_id: before.file.id, metadata: { n: 1 } }), 400, "metadata.n");
    const sixteen = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, "v".repeat(512)]));
    expect((await createBatch({ input_file_id: before.file.id, metadata: sixteen })).status).toBe(200);
  });

  it("ids that try path traversal or odd characters: 404, and no file outside BATCH_DIR is read", async () => {
    const paths = [
      ["GET", "/v1/files/..%2F..%2Fetc%2Fpasswd/content"],
      ["GET", "/v1/files/..%2F..%2Fetc%2Fpasswd"],
      ["GET", "/v1/files/..%252F..%252Fetc%252Fpasswd/content"],
      ["DELETE", `/v1/files/..%2Ffiles%2F${before.file.id}`],
      ["GET", "/v1/files/file-..%2F..%2F..%2Fetc%2Fpasswd/content"],
      ["GET", "/v1/files/../../etc/passwd"],
      ["GET", "/v1/batches/batch_..%2f"],
      ["GET", "/v1/batches/..%2F..%2Fetc%2Fpasswd"],
      ["GET", `/v1/batches/batch_..%2F${before.batch.id}/results`],
      ["POST", "/v1/batches/batch_%2e%2e%2f%2e%2e/cancel"],
      ["GET", "/v1/batches/batch_abc%00def"],
      ["GET", "/v1/files/file-abc%E2%80%AEdef"],
      ["GET", `/v1/files/file-${"a".repeat(5000)}`],
      ["GET", "/v1/files/%2Fetc%2Fpasswd/content"],
    ];
    for (const [method, p] of paths) {
      const res = await raw(method, p);
      expectError(res, 404);
      expect(JSON.stringify(res.body), p).not.toMatch(/root:|\/bin\/(ba)?sh/);
    }
    // In a body, an id of the wrong shape is refused before any lookup, naming the parameter.
    expectError(await createBatch({ input_file_id: "../../etc/passwd" }), 400, "input_file_id");
  });

  it("an upload over MAX_FILE_BYTES: 413 while it is still streaming, the partial file removed", async () => {
    const { port } = new URL(svc.baseUrl);
    const boundary = "----bad-input-boundary";
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n`;
    // The client sends past the limit and then keeps the request open: the answer must not wait for the end.
    const res = await new Promise<{ status: number; body: any; requestEnded: boolean }>((resolve, reject) => {
      const req = http.request(
        {
          host: "127.0.0.1",
          port,
          method: "POST",
          path: "/v1/files",
          headers: { "content-type": `multipart/form-data; boundary=${boundary}` },
        },
        (r) => {
          let text = "";
          r.on("data", (d) => (text += d));
          r.on("end", () => {
            resolve({ status: r.statusCode!, body: JSON.parse(text), requestEnded: req.writableEnded });
            req.destroy();
          });
        },
      );
      req.on("error", reject);
      req.write(head);
      req.write(Buffer.alloc(MAX_FILE_BYTES + 16 * 1024, "x"));
    });
    expectError(res, 413, "file");
    expect(res.body.error.code).toBe("file_too_large");
    expect(res.requestEnded).toBe(false);
    expect(uploadLeftovers()).toEqual([]);
  });

  it("an upload over MAX_FILE_BYTES, sent slowly by many clients at once: each reads its 413, none sees a reset", async () => {
    const send = async () => {
      const form = new FormData();
      form.append("purpose", "batch");
      form.append("file", new Blob([Buffer.alloc(MAX_FILE_BYTES * 16, "x")]), "big.jsonl");
      const encoded = new Response(form);
      const type = encoded.headers.get("content-type")!;
      const bytes = new Uint8Array(await encoded.arrayBuffer());
      const slow = new ReadableStream<Uint8Array>({
        async pull(c) {
          const at = (slow as any).at ?? 0;
          if (at >= bytes.length) return c.close();
          c.enqueue(bytes.subarray(at, at + 8 * 1024));
          (slow as any).at = at + 8 * 1024;
          await new Promise((r) => setTimeout(r, 1));
        },
      });
      const res = await fetch(`${svc.baseUrl}/v1/files`, {
        method: "POST",
        headers: { "content-type": type },
        body: slow,
        duplex: "half",
      } as RequestInit);
      return { status: res.status, body: await res.json() };
    };
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        Array.from({ length: 16 }, () => send().catch((err) => ({ status: 0, body: String(err?.cause?.code ?? err) }))),
      );
      expect(answers.filter((a) => a.status !== 413)).toEqual([]);
      for (const a of answers) expect(a.body.error.code).toBe("file_too_large");
    }
    expect(uploadLeftovers()).toEqual([]);
  });

  /** Uploads `content`, creates a batch over it, and returns the batch as it ended. */
  async function batchOver(content: string) {
    const file = await upload(content);
    expect(file.status).toBe(200);
    const created = await createBatch({ input_file_id: file.body.id });
    expect(created.status).toBe(200);
    return waitForBatch(svc.baseUrl, created.body.id);
  }

  it("more than MAX_REQUESTS_PER_BATCH lines: the batch fails validation", async () => {
    const b = await batchOver(completionJsonl(MAX_REQUESTS + 2, { prefix: "many" }));
    // No request ran: the counts add up (0 + 0 == 0) and the fault is in `errors`.
    expect(b).toMatchObject({ status: "failed", request_counts: { completed: 0, failed: 0, total: 0 } });
    expect(b.errors.data).toContainEqual(expect.objectContaining({ code: "too_many_requests", line: MAX_REQUESTS + 1 }));
  });

  it("a line over MAX_LINE_BYTES: the batch fails validation at that line", async () => {
    const lines = completionJsonl(3, { prefix: "long" }).trimEnd().split("\n");
    lines[1] = JSON.stringify({
      custom_id: "long-1",
      method: "POST",
      url: "/v1/completions",
      body: { prompt: "x".repeat(MAX_LINE_BYTES) },
    });
    const b = await batchOver(`${lines.join("\n")}\n`);
    expect(b.status).toBe("failed");
    expect(b.errors.data).toEqual([expect.objectContaining({ code: "line_too_long", line: 2 })]);
  });

  it("a file that is not JSONL: the batch fails validation, naming the bad lines", async () => {
    const good = completionJsonl(1, { prefix: "fine" }).trimEnd();
    const b = await batchOver(`${["this is not json", good, '{"custom_id": ', "[1, 2, 3]"].join("\n")}\n`);
    expect(b.status).toBe("failed");
    expect(b.errors.data.map((e: any) => e.line)).toEqual([1, 3, 4]);
    for (const e of b.errors.data) expect(e.message).toEqual(expect.any(String));
    // Nothing of a failed batch ever runs.
    expect(existsSync(path.join(svc.batchDir, b.id, "output.jsonl"))).toBe(false);
  });

  it("cancel of a finished batch: returned unchanged", async () => {
    const res = await request(app()).post(`/v1/batches/${before.batch.id}/cancel`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(before.batch);
  });

  it("unknown routes: 404 JSON", async () => {
    for (const [method, p] of [
      ["GET", "/v1/nope"],
      ["POST", "/v2/batches"],
      ["DELETE", "/v1/batches"],
      ["PUT", "/v1/files"],
      ["GET", "/v1/batches/x/y/z"],
    ]) {
      const res = await raw(method, p);
      expectError(res, 404);
      expect(res.body.error.code).toBe("unknown_url");
    }
  });

  it("after all of that the server still answers and what was stored is intact", async () => {
    expect((await request(app()).get("/health")).body).toEqual({ status: "ok" });
    expect((await request(app()).get(`/v1/batches/${before.batch.id}`)).body).toEqual(before.batch);
    expect((await request(app()).get(`/v1/files/${before.file.id}`)).body).toEqual(before.file);
    expect((await request(app()).get(`/v1/files/${before.batch.output_file_id}/content`)).text).toBe(before.output);
    expect(uploadLeftovers()).toEqual([]);
    // Refused requests cost nothing: every batch folder on disk belongs to a batch the API knows.
    const listed = (await request(app()).get("/v1/batches?limit=100")).body.data.map((b: any) => b.id).sort();
    expect(
      readdirSync(svc.batchDir)
        .filter((n) => n.startsWith("batch_"))
        .sort(),
    ).toEqual(listed);
  });
});
