// A prompt plus max_tokens (max_completion_tokens, max_output_tokens) beyond the model's context is refused on that
// line with OpenAI's context_length_exceeded shape, naming the parameter the line used; the rest of the batch runs,
// and a line that names no limit is still capped to what fits, as before.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, startTestService, type TestService, waitForBatch } from "../helpers/service.js";

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ CONTEXT_SIZE: "256" });
});
afterAll(() => svc?.close());

async function run(endpoint: "/v1/chat/completions" | "/v1/completions" | "/v1/responses", bodies: Record<string, object>) {
  const jsonl = Object.entries(bodies)
    .map(([id, body]) => JSON.stringify({ custom_id: id, method: "POST", url: endpoint, body: { model: "m", ...body } }))
    .join("\n");
  const file = await uploadJsonl(svc.baseUrl, `${jsonl}\n`);
  const b = await openaiClient(svc).batches.create({ input_file_id: file.id, endpoint, completion_window: "24h" });
  const done = await waitForBatch(svc.baseUrl, b.id);
  const read = async (id: string | null) =>
    id
      ? (await (await fetch(`${svc.baseUrl}/v1/files/${id}/content`)).text())
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
      : [];
  const all = [...(await read(done.output_file_id)), ...(await read(done.error_file_id))];
  return new Map(all.map((l) => [l.custom_id, l.response]));
}

describe("limits refused per line", () => {
  it("chat: max_tokens and max_completion_tokens past the context, each named; the others run", async () => {
    const chat = (extra: object) => ({ messages: [{ role: "user", content: "Tell me a story." }], ...extra });
    const r = await run("/v1/chat/completions", {
      huge: chat({ max_tokens: 100_000 }),
      huge2: chat({ max_completion_tokens: 300 }),
      ok: chat({ max_tokens: 8 }),
      unset: chat({}),
    });
    for (const [id, param] of [
      ["huge", "max_tokens"],
      ["huge2", "max_completion_tokens"],
    ]) {
      expect(r.get(id).status_code, id).toBe(400);
      expect(r.get(id).body.error).toMatchObject({ type: "invalid_request_error", code: "context_length_exceeded", param });
      expect(r.get(id).body.error.message).toMatch(/maximum context length is 256 tokens/);
    }
    expect(r.get("ok").status_code).toBe(200);
    expect(r.get("ok").body.usage.completion_tokens).toBeLessThanOrEqual(8);
    expect(r.get("unset").status_code).toBe(200);
  });

  it("completions and responses: max_tokens and max_output_tokens, named as the line named them", async () => {
    const c = await run("/v1/completions", { huge: { prompt: "Once upon a time", max_tokens: 1000 }, ok: { prompt: "Hi", max_tokens: 4 } });
    expect(c.get("huge").body.error).toMatchObject({ code: "context_length_exceeded", param: "max_tokens" });
    expect(c.get("ok").status_code).toBe(200);
    const r = await run("/v1/responses", {
      huge: { input: "Hello", max_output_tokens: 5000 },
      ok: { input: "Hello", max_output_tokens: 4 },
    });
    expect(r.get("huge").status_code).toBe(400);
    expect(r.get("huge").body.error).toMatchObject({ code: "context_length_exceeded", param: "max_output_tokens" });
    expect(r.get("ok").status_code).toBe(200);
    // Exactly what fits is accepted: the limit is the context, not one token less.
    const lines = completionJsonl(1, { prefix: "fit", maxTokens: 200 });
    const file = await uploadJsonl(svc.baseUrl, lines);
    const b = await openaiClient(svc).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
    expect((await waitForBatch(svc.baseUrl, b.id)).request_counts).toMatchObject({ completed: 1, failed: 0 });
  });

  it("a prompt too long for the context names the prompt's field: messages, prompt, input", async () => {
    const long = "Once upon a time there was a very long story. ".repeat(60);
    const chat = await run("/v1/chat/completions", { long: { messages: [{ role: "user", content: long }] } });
    const completions = await run("/v1/completions", { long: { prompt: long } });
    const responses = await run("/v1/responses", { long: { input: long } });
    for (const [r, param] of [
      [chat, "messages"],
      [completions, "prompt"],
      [responses, "input"],
    ] as const) {
      expect(r.get("long").status_code, param).toBe(400);
      expect(r.get("long").body.error).toMatchObject({ type: "invalid_request_error", code: "context_length_exceeded", param });
    }
  });
});
