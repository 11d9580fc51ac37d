// The official `openai` npm client, unchanged, against the real service and engine.
import path from "node:path";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openaiClient, startTestService, type TestService, waitForClientBatch } from "../helpers/service.js";

let svc: TestService;
let client: OpenAI;

const line = (i: number, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    custom_id: `req-${i}`,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model: "local", messages: [{ role: "user", content: `Tell me a story number ${i}` }], max_tokens: 8, temperature: 0, ...extra },
  });

beforeAll(async () => {
  svc = await startTestService();
  client = openaiClient(svc);
});
afterAll(async () => svc?.close());

const waitDone = (id: string) => waitForClientBatch(client, id);

describe("openai client against the service", () => {
  it("uploads, creates, polls and downloads results", async () => {
    const jsonl = `${Array.from({ length: 6 }, (_, i) => line(i)).join("\n")}\n`;
    const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), "input.jsonl"), purpose: "batch" });
    expect(file).toMatchObject({ object: "file", purpose: "batch", filename: "input.jsonl", bytes: Buffer.byteLength(jsonl) });
    expect((await client.files.retrieve(file.id)).id).toBe(file.id);

    const created = await client.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { suite: "openai-client" },
    });
    expect(created.object).toBe("batch");
    expect(created.metadata).toEqual({ suite: "openai-client" });

    const batch = await waitDone(created.id);
    expect(batch.status).toBe("completed");
    expect(batch.request_counts).toEqual({ completed: 6, failed: 0, total: 6 });
    expect(batch.usage?.output_tokens).toBeGreaterThan(0);
    expect(batch.completed_at).toBeGreaterThanOrEqual(batch.created_at);

    const text = await (await client.files.content(batch.output_file_id!)).text();
    const rows = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows.map((r) => r.custom_id).sort()).toEqual(Array.from({ length: 6 }, (_, i) => `req-${i}`).sort());
    for (const r of rows) {
      expect(r.error).toBeNull();
      expect(r.response.status_code).toBe(200);
      expect(r.response.body.object).toBe("chat.completion");
      expect(r.response.body.choices[0].message.role).toBe("assistant");
      expect(r.response.body.usage.completion_tokens).toBeGreaterThan(0);
    }
    // The batch's folder holds its own copy of everything.
    const dir = path.join(svc.batchDir, batch.id);
    expect((await import("node:fs")).existsSync(path.join(dir, "output.jsonl"))).toBe(true);
  });

  it("auto-paginates batches and files with after cursors", async () => {
    const jsonl = `${line(0)}\n`;
    const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), "one.jsonl"), purpose: "batch" });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const b = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
      ids.push(b.id);
    }
    const seen: string[] = [];
    for await (const b of client.batches.list({ limit: 2 })) seen.push(b.id);
    expect(new Set(seen).size).toBe(seen.length);
    for (const id of ids) expect(seen).toContain(id);

    const page = await client.batches.list({ limit: 2 });
    expect(page.data).toHaveLength(2);
    expect(page.hasNextPage()).toBe(true);

    const files: string[] = [];
    for await (const f of client.files.list({ limit: 1 })) files.push(f.id);
    expect(files).toContain(file.id);
    for (const id of ids) await waitDone(id);
  });

  it("cancels a batch and keeps the accounting whole", async () => {
    const long = Array.from({ length: 40 }, (_, i) => line(i, { max_tokens: 200 })).join("\n");
    const file = await client.files.create({ file: await toFile(Buffer.from(long), "long.jsonl"), purpose: "batch" });
    const b = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const cancelled = await client.batches.cancel(b.id);
    expect(["cancelling", "cancelled"]).toContain(cancelled.status);
    const done = await waitDone(b.id);
    expect(done.status).toBe("cancelled");
    const c = done.request_counts!;
    expect(c.completed + c.failed).toBe(c.total);
    expect(c.total).toBe(40);
    const errors = await (await client.files.content(done.error_file_id!)).text();
    expect(errors).toContain("batch_cancelled");
  });

  it("surfaces OpenAI-shaped errors as the client's typed errors", async () => {
    await expect(client.batches.retrieve("batch_doesnotexist")).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(
      client.batches.create({ input_file_id: "file-missing", endpoint: "/v1/chat/completions", completion_window: "24h" }),
    ).rejects.toMatchObject({ status: 404, param: "input_file_id" });
    const del = await client.files.create({ file: await toFile(Buffer.from(line(1)), "x.jsonl"), purpose: "batch" });
    expect(await client.files.delete(del.id)).toMatchObject({ id: del.id, deleted: true });
    await expect(client.files.retrieve(del.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe("one rule for model names (one model answers every name)", () => {
  it("finds any name a batch may use, as the model that serves it; a batch reports that model, failed or not", async () => {
    const served = svc.service.backend.info.model;
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toEqual([served]);
    for (const name of [served, "gpt-4o", "Qwen/Qwen2.5-0.5B-Instruct"])
      expect(await client.models.retrieve(name)).toMatchObject({ id: served, object: "model" });
    // A file that fails validation still reports the model its lines chose: the one serving "gpt-4o".
    const bad = `${line(0, { model: "gpt-4o" })}\n${line(0, { model: "gpt-4o" })}\n`;
    const file = await client.files.create({ file: await toFile(Buffer.from(bad), "dup.jsonl"), purpose: "batch" });
    const b = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    expect(b.status).toBe("failed");
    expect(b.errors?.data?.[0]?.code).toBe("duplicate_custom_id");
    expect(b.model).toBe(served);
    // So does a file whose only line names a model but the wrong url.
    const wrongUrl = JSON.stringify({ custom_id: "u", method: "POST", url: "/v1/completions", body: { model: "gpt-4o", prompt: "x" } });
    const other = await client.files.create({ file: await toFile(Buffer.from(wrongUrl), "url.jsonl"), purpose: "batch" });
    const c = await client.batches.create({ input_file_id: other.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    expect([c.status, c.errors?.data?.[0]?.code, c.model]).toEqual(["failed", "mismatched_url", served]);
  });
});

describe("a request without a model", () => {
  it("is refused on OpenAI's endpoints, streamed or not, naming model; a batch line (and the inline form) takes its batch's", async () => {
    // The client's types require model, as OpenAI does; a caller that drops it (JavaScript, a cast) gets OpenAI's 400.
    const noModel = <T>(body: T) => body as T & { model: string };
    const refused = { status: 400, code: "missing_required_parameter", param: "model" };
    const chat = { messages: [{ role: "user" as const, content: "hi" }], max_tokens: 2 };
    await expect(client.chat.completions.create(noModel(chat))).rejects.toMatchObject(refused);
    await expect(client.chat.completions.create(noModel({ ...chat, stream: true as const }))).rejects.toMatchObject(refused);
    await expect(client.completions.create(noModel({ prompt: "Once", max_tokens: 2 }))).rejects.toMatchObject(refused);
    await expect(client.embeddings.create(noModel({ input: "Once" }))).rejects.toMatchObject(refused);
    await expect(client.responses.create(noModel({ input: "Once", max_output_tokens: 16 }))).rejects.toMatchObject(refused);

    const lineWithout = JSON.stringify({ custom_id: "m", method: "POST", url: "/v1/chat/completions", body: chat });
    const file = await client.files.create({ file: await toFile(Buffer.from(lineWithout), "m.jsonl"), purpose: "batch" });
    const b = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    expect(await waitDone(b.id)).toMatchObject({ status: "completed", model: svc.service.backend.info.model });
    const inline = await fetch(`${svc.baseUrl}/v1/batches`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", input: [{ prompt: "Once" }], max_tokens: 2 }),
    });
    expect(inline.status).toBe(200);
  });
});

describe("the bound on what one answer may hold", () => {
  it("refuses a request whose logprobs could pass it, before it runs, synchronously, streamed and as a batch line", async () => {
    // Every value within OpenAI's ranges; three at once held 2.7 GB of the server's memory.
    const huge = {
      model: "m",
      messages: [{ role: "user" as const, content: "hi" }],
      max_tokens: 900,
      n: 128,
      logprobs: true,
      top_logprobs: 20,
    };
    const refused = { status: 400, code: "invalid_request", param: "max_tokens" };
    await expect(client.chat.completions.create(huge)).rejects.toMatchObject(refused);
    await expect(client.chat.completions.create({ ...huge, stream: true })).rejects.toMatchObject(refused);
    const err = (await client.chat.completions.create(huge).catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/n \(128\) × max_tokens \(900\) × \(1 \+ top_logprobs \(20\)\).*at most 262144/);
    // What fits is answered, whole.
    const fits = await client.chat.completions.create({ ...huge, n: 2, max_tokens: 4 });
    expect(fits.choices.map((c) => c.logprobs?.content?.[0]?.top_logprobs.length)).toEqual([20, 20]);

    const lines = [
      JSON.stringify({ custom_id: "huge", method: "POST", url: "/v1/chat/completions", body: huge }),
      JSON.stringify({ custom_id: "fits", method: "POST", url: "/v1/chat/completions", body: { ...huge, n: 1, max_tokens: 2 } }),
    ].join("\n");
    const file = await client.files.create({ file: await toFile(Buffer.from(lines), "bound.jsonl"), purpose: "batch" });
    const b = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const done = await waitDone(b.id);
    expect(done.request_counts).toMatchObject({ completed: 1, failed: 1 });
    const errors = await (await client.files.content(done.error_file_id!)).text();
    expect(JSON.parse(errors.trim())).toMatchObject({
      custom_id: "huge",
      response: { status_code: 400, body: { error: { code: refused.code, param: "max_tokens" } } },
    });
  });
});

describe("a chat completion asked to be stored", () => {
  it("is refused naming store, as nothing here keeps it for the client's retrieve; store: false is answered", async () => {
    const body = { model: "m", messages: [{ role: "user" as const, content: "hi" }], max_tokens: 2 };
    await expect(client.chat.completions.create({ ...body, store: true })).rejects.toMatchObject({ status: 400, param: "store" });
    expect((await client.chat.completions.create({ ...body, store: false })).choices).toHaveLength(1);
  });
});
