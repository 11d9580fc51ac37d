// The synchronous endpoints through the real service and the official clients, on the generated model (its
// template has a tool-call format): each endpoint answers as a batch line of it would, naming the tier that
// served it; bad bodies get the batch line's 400; and each lane, once its room and queue are full, answers 429
// with Retry-After instead of queueing without bound.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/generated-model.js";
import { startTestService, type TestService } from "../helpers/service.js";

let svc: TestService;
let full: TestService;
let client: OpenAI;
beforeAll(async () => {
  const model = await ensureGeneratedModel();
  svc = await startTestService({ MODEL_PATH: model, CONTEXT_SIZE: "1024", SEQUENCES: "2" });
  // One sequence (room for two flex requests and one interactive), and no queue for either lane.
  full = await startTestService({
    MODEL_PATH: model,
    CONTEXT_SIZE: "1024",
    SEQUENCES: "1",
    FLEX_QUEUE_MAX: "0",
    INTERACTIVE_QUEUE_MAX: "0",
  });
  client = new OpenAI({ baseURL: `${svc.baseUrl}/v1`, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await svc?.close();
  await full?.close();
});

const user = (content: string) => [{ role: "user" as const, content }];

describe("synchronous endpoints", () => {
  it("answer chat, completions, embeddings and responses through the openai client, naming the tier", async () => {
    const chat = await client.chat.completions.create({ model: "any", messages: user("Hello"), max_tokens: 6, temperature: 0 });
    expect(chat).toMatchObject({
      object: "chat.completion",
      service_tier: "default",
      choices: [{ index: 0, message: { role: "assistant" } }],
    });
    expect(chat.usage?.completion_tokens).toBeGreaterThan(0);

    const flex = await client.completions.create({
      model: "any",
      prompt: "Once upon a time",
      max_tokens: 4,
      service_tier: "flex",
    } as never);
    expect(flex).toMatchObject({ object: "text_completion", service_tier: "flex" });
    expect((flex as OpenAI.Completion).choices[0].text.length).toBeGreaterThan(0);

    const embedded = await client.embeddings.create({ model: "any", input: ["one", "two"] });
    expect(embedded.data.map((d) => d.index)).toEqual([0, 1]);
    expect(embedded.data[0].embedding.length).toBeGreaterThan(0);

    const response = await client.responses.create({ model: "any", input: "Say hi", max_output_tokens: 8 });
    expect(response).toMatchObject({ object: "response", status: expect.stringMatching(/completed|incomplete/) });
    expect(response.service_tier).toBe("default");
  });

  it("answer Anthropic's messages through @anthropic-ai/sdk", async () => {
    const anthropic = new Anthropic({ apiKey: "unused", baseURL: svc.baseUrl, maxRetries: 0 });
    const message = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 8, messages: user("Hello") });
    expect(message).toMatchObject({ type: "message", role: "assistant", usage: { service_tier: "standard" } });
    expect(message.usage.output_tokens).toBeGreaterThan(0);
  });

  it("refuse a bad body as a batch line's 400, naming the field, and refuse stream", async () => {
    const bad = await client.chat.completions.create({ model: "any", messages: user("x"), bogus: 1 } as never).catch((e) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad.error).toMatchObject({ code: "unknown_parameter", param: "bogus" });
    const temp = await client.chat.completions.create({ model: "any", messages: user("x"), temperature: 9 }).catch((e) => e);
    expect(temp.status).toBe(400);
    expect(temp.error.param).toBe("temperature");
    const stream = await fetch(`${svc.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "any", messages: user("x"), stream: true }),
    });
    expect(stream.status).toBe(400);
    expect((await stream.json()).error).toMatchObject({ param: "stream", code: "unsupported_value" });
    const anthropic = new Anthropic({ apiKey: "unused", baseURL: svc.baseUrl, maxRetries: 0 });
    const noMax = await anthropic.messages.create({ model: "m", messages: user("x") } as never).catch((e) => e);
    expect(noMax).toBeInstanceOf(Anthropic.BadRequestError);
    expect(noMax.error).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
  });

  it("answer 429 with Retry-After once a lane's room and queue are full, and serve the rest", async () => {
    const c = new OpenAI({ baseURL: `${full.baseUrl}/v1`, apiKey: "unused", maxRetries: 0 });
    const ask = (tier: "flex" | "default") =>
      c.chat.completions.create({ model: "any", messages: user("Tell a long story"), max_tokens: 200, service_tier: tier } as never).then(
        () => "ok",
        (e) => e,
      );
    for (const [tier, room] of [
      ["flex", 2],
      ["default", 1],
    ] as const) {
      const answers = await Promise.all(Array.from({ length: room + 3 }, () => ask(tier)));
      const refused = answers.filter((a) => a !== "ok");
      expect(answers.filter((a) => a === "ok").length, tier).toBeGreaterThanOrEqual(room);
      expect(refused.length, tier).toBeGreaterThan(0);
      for (const e of refused) {
        expect(e).toBeInstanceOf(OpenAI.RateLimitError);
        expect(e.error).toMatchObject({ code: "resource_unavailable", type: "rate_limit_error" });
        expect(Number(e.headers.get("retry-after"))).toBeGreaterThan(0);
      }
    }
  });

  it("free a request's room at once when its client goes away", async () => {
    const c = new OpenAI({ baseURL: `${full.baseUrl}/v1`, apiKey: "unused", maxRetries: 0 });
    const long = { model: "any", messages: user("Tell a long story"), max_tokens: 900, temperature: 1 };
    const gone = new AbortController();
    const first = c.chat.completions.create(long, { signal: gone.signal }).catch((e) => e);
    await new Promise((r) => setTimeout(r, 150));
    gone.abort();
    expect(await first).toBeInstanceOf(OpenAI.APIUserAbortError);
    // The interactive lane here has room for one and no queue: a request still running would make this a 429.
    await new Promise((r) => setTimeout(r, 100));
    const next = await c.chat.completions.create({ ...long, max_tokens: 4 });
    expect(next.choices[0].message.role).toBe("assistant");
  });
});
