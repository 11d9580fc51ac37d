// Retention as OpenAI's clients send it: expires_after on an upload (multipart fields expires_after[anchor]
// and expires_after[seconds]) and output_expires_after on a batch, through the real service.
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openaiClient, startTestService, type TestService, waitForBatch } from "../helpers/service.js";

let svc: TestService;
let client: OpenAI;
beforeAll(async () => {
  svc = await startTestService();
  client = openaiClient(svc);
});
afterAll(async () => svc?.close());

const lines = `${JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/completions", body: { model: "m", prompt: "Once", max_tokens: 2 } })}\n`;
const file = async (expires_after?: { anchor: "created_at"; seconds: number }) =>
  client.files.create({
    file: await toFile(Buffer.from(lines), "in.jsonl"),
    purpose: "batch",
    ...(expires_after ? { expires_after } : {}),
  });

describe("retention", () => {
  it("sets expires_at from expires_after on upload, and the default without it", async () => {
    const short = await file({ anchor: "created_at", seconds: 3600 });
    expect(short.expires_at).toBe(short.created_at + 3600);
    const plain = await file();
    expect(plain.expires_at).toBe(plain.created_at + svc.config.fileExpirySeconds);
  });

  it("refuses expires_after outside OpenAI's range or anchor, naming the field", async () => {
    for (const [value, param] of [
      [{ anchor: "created_at", seconds: 60 }, "expires_after.seconds"],
      [{ anchor: "created_at", seconds: 2_592_001 }, "expires_after.seconds"],
      [{ anchor: "last_active_at", seconds: 3600 }, "expires_after.anchor"],
    ] as const) {
      const err = await file(value as never).catch((e) => e);
      expect(err, JSON.stringify(value)).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.param).toBe(param);
    }
  });

  it("gives a batch's output file the output_expires_after it was created with", async () => {
    const input = await file();
    const created = await client.batches.create({
      input_file_id: input.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      output_expires_after: { anchor: "created_at", seconds: 7200 },
    });
    const done = await waitForBatch(svc.baseUrl, created.id);
    expect(done.status).toBe("completed");
    const output = await client.files.retrieve(done.output_file_id);
    expect(output.expires_at).toBe(output.created_at + 7200);
    // Deleting the output file: the batch stops naming it (a client never gets an id that is 404).
    await client.files.delete(done.output_file_id);
    expect((await client.batches.retrieve(created.id)).output_file_id).toBeNull();
    const err = await client.batches
      .create({
        input_file_id: input.id,
        endpoint: "/v1/completions",
        completion_window: "24h",
        output_expires_after: { anchor: "created_at", seconds: 10 },
      })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.param).toBe("output_expires_after.seconds");
  });
});
