// The app's guards through the real app, control plane and engine: a body the browser could send from another
// site without asking (text/plain, a form, multipart where no file is taken) is a 415 and changes nothing; a write
// from a page of another origin is a 403 and changes nothing; the official clients go on working; each route reads
// a body of the size it takes.
import type OpenAI from "openai";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { pollBatch } from "../helpers/http-batches.js";
import { openaiClient, startTestService, type TestService } from "../helpers/service.js";

const MAX_LINE_BYTES = 256 * 1024;

let svc: TestService;
let client: OpenAI;
/** A long batch on the one slot: the target of the pauses and cancels a hostile page tries. */
let id = "";
const app = () => svc.service.app;

beforeAll(async () => {
  svc = await startTestService({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0", MAX_LINE_BYTES: String(MAX_LINE_BYTES) });
  client = openaiClient(svc);
  const file = await client.files.create({
    file: new File([completionJsonl(500, { prefix: "g", maxTokens: 256 })], "long.jsonl"),
    purpose: "batch",
  });
  id = (await client.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" })).id;
  await pollBatch(svc.baseUrl, id, (b) => b.status === "in_progress");
}, 120_000);
afterAll(async () => svc?.close());

/** What a refused request must leave as it was. */
async function state() {
  const batch = await client.batches.retrieve(id);
  const batches = (await client.batches.list({ limit: 100 })).data.length;
  const files = (await client.files.list()).data.length;
  return { status: batch.status, paused_at: (batch as unknown as { paused_at: number | null }).paused_at, batches, files };
}

function expectRefused(res: request.Response, status: number, code: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.error).toMatchObject({ code, param: null });
}

describe("bodies a page of another site could send without a preflight", () => {
  it("are refused with 415 on JSON routes, and nothing changes", async () => {
    const before = await state();
    const inline = JSON.stringify({ input: [{ prompt: "Once" }], max_tokens: 2 });
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const send = (path: string, body: string) => request(app()).post(path).set("content-type", type).send(body);
      expectRefused(await send("/v1/batches/pause", "{}"), 415, "unsupported_media_type");
      expectRefused(await send(`/v1/batches/${id}/pause`, "{}"), 415, "unsupported_media_type");
      expectRefused(await send("/v1/batches", inline), 415, "unsupported_media_type");
      expectRefused(await send("/v1/chat/completions", '{"messages":[{"role":"user","content":"hi"}]}'), 415, "unsupported_media_type");
      expectRefused(
        await send("/v1/uploads", '{"filename":"a.jsonl","purpose":"batch","bytes":1,"mime_type":"text/jsonl"}'),
        415,
        "unsupported_media_type",
      );
    }
    expect(await state()).toEqual(before);
  });

  it("Anthropic's routes refuse them in Anthropic's envelope", async () => {
    const res = await request(app()).post("/v1/messages").set("content-type", "text/plain").send('{"max_tokens":2}');
    expect(res.status).toBe(415);
    expect(res.body).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
  });

  it("a file route takes multipart only", async () => {
    const json = await request(app()).post("/v1/files").send({ purpose: "batch" });
    expectRefused(json, 415, "unsupported_media_type");
  });
});

describe("writes from a page of another origin", () => {
  it("are refused with 403 origin_not_allowed, and nothing changes", async () => {
    const before = await state();
    const page = { origin: "http://127.0.0.1:9", "sec-fetch-site": "same-site" };
    const json = { ...page, "content-type": "application/json" };
    expectRefused(await request(app()).post(`/v1/batches/${id}/pause`).set(page), 403, "origin_not_allowed");
    expectRefused(await request(app()).post(`/v1/batches/${id}/cancel`).set(page), 403, "origin_not_allowed");
    expectRefused(await request(app()).post("/v1/batches/pause").set(json).send("{}"), 403, "origin_not_allowed");
    expectRefused(
      await request(app())
        .post("/v1/batches")
        .set(json)
        .send({ input: [{ prompt: "Once" }], max_tokens: 2 }),
      403,
      "origin_not_allowed",
    );
    expectRefused(
      await request(app()).post("/v1/files").set(page).field("purpose", "batch").attach("file", Buffer.from("{}\n"), "a.jsonl"),
      403,
      "origin_not_allowed",
    );
    expectRefused(await request(app()).delete("/v1/files/file-abc").set({ origin: "https://evil.example" }), 403, "origin_not_allowed");
    const preflight = await request(app())
      .options("/v1/batches")
      .set({ origin: "https://evil.example", "access-control-request-method": "POST" });
    expectRefused(preflight, 403, "origin_not_allowed");
    expect(preflight.headers["access-control-allow-origin"]).toBeUndefined();
    expect(await state()).toEqual(before);
  });
});

describe("the official client and the body limits", () => {
  it("a synchronous request takes a body up to MAX_LINE_BYTES, the size of a batch line, beyond 64 KB", async () => {
    const long = { model: "m", messages: [{ role: "user", content: "a ".repeat(100_000) }], max_tokens: 1 };
    const res = await request(app()).post("/v1/chat/completions").send(long);
    // Read and judged: the prompt does not fit the test model's context, which is a 400 naming it, not a 413.
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("context_length_exceeded");
    const over = { ...long, messages: [{ role: "user", content: "a".repeat(MAX_LINE_BYTES) }] };
    const refused = await request(app()).post("/v1/chat/completions").send(over);
    expectRefused(refused, 413, "request_too_large");
    expect(refused.body.error.message).toContain(String(MAX_LINE_BYTES));
  });

  it("other routes read 64 KB at most", async () => {
    const res = await request(app())
      .post(`/v1/batches/${id}/retry`)
      .send({ codes: Array.from({ length: 10_000 }, () => "server_error") });
    expectRefused(res, 413, "request_too_large");
    expect(res.body.error.message).toContain(String(64 * 1024));
  });

  it("the openai client's JSON, multipart and bodiless POSTs all work: a request, an upload, a cancel", async () => {
    const chat = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "Once" }], max_tokens: 2 });
    expect(chat.object).toBe("chat.completion");
    const cancelled = await client.batches.cancel(id);
    expect(["cancelling", "cancelled"]).toContain(cancelled.status);
  });
});
