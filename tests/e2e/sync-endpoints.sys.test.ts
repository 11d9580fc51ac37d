// The synchronous endpoints through the real service and the official clients, on the generated model (its
// template has a tool-call format): each endpoint answers as a batch line of it would, naming the tier that
// served it; bad bodies get the batch line's 400; and each lane, once its room and queue are full, answers 429
// with Retry-After instead of queueing without bound.
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { pythonWith } from "../../testkit/python.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { NEVER_ENDS } from "../helpers/long-stream.js";
import { metricSample } from "../helpers/metric-sample.js";
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
    // OpenAI's Completion and embeddings list have no service_tier: the lane is taken, the answer is as typed.
    expect(flex).toMatchObject({ object: "text_completion" });
    expect(flex).not.toHaveProperty("service_tier");
    expect((flex as OpenAI.Completion).choices[0].text.length).toBeGreaterThan(0);

    const embedded = await client.embeddings.create({ model: "any", input: ["one", "two"], service_tier: "flex" } as never);
    expect(embedded).not.toHaveProperty("service_tier");
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

  it("refuse a bad body as a batch line's 400, naming the field, and stream where the endpoint answers whole", async () => {
    const bad = await client.chat.completions.create({ model: "any", messages: user("x"), bogus: 1 } as never).catch((e) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad.error).toMatchObject({ code: "unknown_parameter", param: "bogus" });
    const temp = await client.chat.completions.create({ model: "any", messages: user("x"), temperature: 9 }).catch((e) => e);
    expect(temp.status).toBe(400);
    expect(temp.error.param).toBe("temperature");
    for (const [path, body] of [
      ["/v1/embeddings", { model: "any", input: "x", stream: true }],
      ["/v1/chat/completions", { model: "any", messages: user("x"), stream_options: { include_usage: true } }],
      ["/v1/chat/completions", { model: "any", messages: user("x"), stream: true, stream_options: { usage: true } }],
    ] as const) {
      const r = await fetch(`${svc.baseUrl}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(r.status, path).toBe(400);
      expect((await r.json()).error.param).toMatch(/^stream/);
    }
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
    // The metrics count each lane's refusals as such.
    const sample = await metricsOf(full);
    for (const tier of ["flex", "default"])
      expect(sample("obi_sync_requests_total", `tier="${tier}",model="[^"]+",outcome="refused"`), tier).toBeGreaterThanOrEqual(1);
  });

  it("free a request's room at once when its client goes away", async () => {
    const c = new OpenAI({ baseURL: `${full.baseUrl}/v1`, apiKey: "unused", maxRetries: 0 });
    const long = { model: "any", messages: user("Tell a long story"), max_tokens: 900, temperature: 1, logit_bias: NEVER_ENDS };
    const gone = new AbortController();
    const first = c.chat.completions.create(long, { signal: gone.signal }).catch((e) => e);
    await new Promise((r) => setTimeout(r, 150));
    gone.abort();
    expect(await first).toBeInstanceOf(OpenAI.APIUserAbortError);
    // The interactive lane here has room for one and no queue: a request still running would make this a 429. Its
    // room is given back as the server sees the connection close: within moments, where the story would take many
    // seconds (a loaded machine sees the close later than an idle one).
    await expect.poll(() => defaultLaneRunning(full), { timeout: 5_000, interval: 50 }).toBe(0);
    const next = await c.chat.completions.create({ ...long, max_tokens: 4 });
    expect(next.choices[0].message.role).toBe("assistant");
  });
});

/** `service`'s /metrics now: a sample's value by its name and a pattern of its first labels (NaN where none matches). */
async function metricsOf(service: TestService): Promise<(name: string, labels: string) => number> {
  const text = await (await fetch(`${service.baseUrl}/metrics`)).text();
  return (name, labels) => metricSample(text, name, labels);
}

/** How many requests the default tier's interactive lane of `service` runs now. */
const defaultLaneRunning = async (service: TestService) => (await metricsOf(service))("obi_sync_lane_running", 'tier="default"');

/** A streamed chat's chunks as the openai client parses them. */
async function chunksOf(stream: AsyncIterable<OpenAI.ChatCompletionChunk>): Promise<OpenAI.ChatCompletionChunk[]> {
  const out: OpenAI.ChatCompletionChunk[] = [];
  for await (const chunk of stream) out.push(chunk);
  return out;
}

const weather = {
  type: "object",
  properties: { city: { type: "string", enum: ["Paris", "Rome"] } },
  required: ["city"],
  additionalProperties: false,
};

describe("streaming", () => {
  it("streams a chat answer whose pieces add up to the answer given whole, then its finish_reason and the usage", async () => {
    const body = { model: "any", messages: user("Tell me about Rome."), max_tokens: 24, temperature: 0, stop: ["\n\n"] };
    const whole = await client.chat.completions.create(body);
    const chunks = await chunksOf(await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }));
    const text = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? "")).join("");
    expect(text).toBe(whole.choices[0].message.content);
    expect(chunks.filter((c) => c.choices.length > 0).length).toBeGreaterThan(2);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks[0]).toMatchObject({
      object: "chat.completion.chunk",
      service_tier: "default",
      choices: [{ delta: { role: "assistant" } }],
    });
    expect(chunks.at(-2)?.choices[0].finish_reason).toBe(whole.choices[0].finish_reason);
    // The prompt is in the cache the second time: the tokens agree, the cached part need not.
    const { prompt_tokens, completion_tokens } = whole.usage!;
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens, completion_tokens } });
  });

  it("streams tool calls and a JSON schema answer that the client's helper assembles", async () => {
    const tools = [{ type: "function" as const, function: { name: "get_weather", parameters: weather } }];
    const calling = client.chat.completions.stream({
      model: "any",
      messages: user("Weather in Rome?"),
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
    });
    const called = await calling.finalChatCompletion();
    const call = called.choices[0].message.tool_calls?.[0];
    expect(call).toMatchObject({ type: "function", function: { name: "get_weather" } });
    expect(["Paris", "Rome"]).toContain(JSON.parse((call as OpenAI.ChatCompletionMessageFunctionToolCall).function.arguments).city);
    expect(called.choices[0].finish_reason).toBe("tool_calls");

    const structured = client.chat.completions.stream({
      model: "any",
      messages: user("A city?"),
      max_tokens: 64,
      response_format: { type: "json_schema", json_schema: { name: "city", schema: weather, strict: true } },
    });
    const answered = await structured.finalChatCompletion();
    expect(["Paris", "Rome"]).toContain(JSON.parse(answered.choices[0].message.content ?? "").city);
  });

  it("streams Anthropic's messages as @anthropic-ai/sdk accumulates them: text, tool use, stop reason and usage", async () => {
    const anthropic = new Anthropic({ apiKey: "unused", baseURL: svc.baseUrl, maxRetries: 0 });
    const params = { model: "claude-sonnet-4-5", max_tokens: 24, temperature: 0, messages: user("Tell me about Rome.") };
    const whole = await anthropic.messages.create(params);
    const events: string[] = [];
    let started: Anthropic.Usage | undefined;
    const stream = anthropic.messages.stream(params).on("streamEvent", (e) => {
      events.push(e.type);
      if (e.type === "message_start") started = { ...e.message.usage };
    });
    const streamed = await stream.finalMessage();
    expect(streamed.content).toEqual(whole.content);
    expect(streamed.stop_reason).toBe(whole.stop_reason);
    // The prompt is cached from the first request: the same tokens, read from the cache this time.
    const input = (u: Anthropic.Usage) => u.input_tokens + (u.cache_read_input_tokens ?? 0);
    expect(streamed.usage).toEqual({
      ...whole.usage,
      input_tokens: streamed.usage.input_tokens,
      cache_read_input_tokens: streamed.usage.cache_read_input_tokens,
    });
    expect(input(streamed.usage)).toBe(input(whole.usage));
    // Clients record the input tokens from message_start, as Anthropic sends them there.
    expect(started).toMatchObject({ input_tokens: streamed.usage.input_tokens, service_tier: "standard" });
    expect(input(started!)).toBe(input(whole.usage));
    expect(events[0]).toBe("message_start");
    expect(events.filter((e) => e === "content_block_delta").length).toBeGreaterThan(1);
    expect(events.at(-1)).toBe("message_stop");

    const tool = { name: "get_weather", description: "The weather", input_schema: weather as Anthropic.Tool.InputSchema };
    const called = await anthropic.messages
      .stream({
        model: "m",
        max_tokens: 512,
        messages: user("Weather in Rome?"),
        tools: [tool],
        tool_choice: { type: "tool", name: "get_weather" },
      })
      .finalMessage();
    expect(called.stop_reason).toBe("tool_use");
    expect(called.usage).toMatchObject({ input_tokens: expect.any(Number), service_tier: "standard" });
    expect(called.usage.input_tokens).toBeGreaterThan(0);
    const use = called.content.find((b) => b.type === "tool_use");
    expect(use).toMatchObject({ type: "tool_use", id: expect.stringMatching(/^toolu_/), name: "get_weather" });
    expect(["Paris", "Rome"]).toContain((use as Anthropic.ToolUseBlock & { input: { city: string } }).input.city);
  });

  it("streams responses as the openai client accumulates them: text deltas, a function call, the final response", async () => {
    const params = { model: "any", input: "Tell me about Rome.", max_output_tokens: 24, temperature: 0 };
    const whole = await client.responses.create(params);
    const types: string[] = [];
    const stream = client.responses.stream(params).on("event", (e) => types.push(e.type));
    const final = await stream.finalResponse();
    expect(final.output_text).toBe(whole.output_text);
    expect(final.status).toBe(whole.status);
    expect(types.slice(0, 4)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    expect(types.filter((t) => t === "response.output_text.delta").length).toBeGreaterThan(1);
    expect(types.at(-1)).toMatch(/^response\.(completed|incomplete)$/);
    // stream_options, as openai-node types it for a response: include_obfuscation (no padding is ever added).
    const optioned = await client.responses.stream({ ...params, stream_options: { include_obfuscation: false } }).finalResponse();
    expect(optioned.output_text).toBe(whole.output_text);

    const called = await client.responses
      .stream({
        model: "any",
        input: "Weather in Rome?",
        tools: [{ type: "function", name: "get_weather", parameters: weather, strict: true }],
        tool_choice: { type: "function", name: "get_weather" },
      })
      .finalResponse();
    const call = called.output.find((o) => o.type === "function_call");
    expect(call).toMatchObject({ type: "function_call", name: "get_weather" });
    expect(["Paris", "Rome"]).toContain(JSON.parse((call as OpenAI.Responses.ResponseFunctionToolCall).arguments).city);
  });

  it("refuses a streamed prompt over the context as it refuses one answered whole: a 400 before any event", async () => {
    const long = "word ".repeat(3000);
    const chat = await client.chat.completions.create({ model: "any", messages: user(long), stream: true }).catch((e) => e);
    expect(chat).toBeInstanceOf(OpenAI.BadRequestError);
    expect(chat.error).toMatchObject({ code: "context_length_exceeded", param: "messages" });
    const response = await client.responses.create({ model: "any", input: long, stream: true }).catch((e) => e);
    expect(response).toBeInstanceOf(OpenAI.BadRequestError);
    const anthropic = new Anthropic({ apiKey: "unused", baseURL: svc.baseUrl, maxRetries: 0 });
    const message = await anthropic.messages.create({ model: "m", max_tokens: 8, messages: user(long), stream: true }).catch((e) => e);
    expect(message).toBeInstanceOf(Anthropic.BadRequestError);
  });

  it("streams completions, an echoed prompt first, each of n choices by its index", async () => {
    const stream = await client.completions.create({
      model: "any",
      prompt: "Once upon a time",
      max_tokens: 6,
      n: 2,
      echo: true,
      stream: true,
      // Greedy: a sampled answer may end at the model's end token within 6 tokens, which is no fault of the stream.
      temperature: 0,
    });
    const texts = ["", ""];
    const finished: Array<string | null> = [null, null];
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        texts[c.index] += c.text;
        if (c.finish_reason) finished[c.index] = c.finish_reason;
      }
    }
    for (const t of texts) expect(t.startsWith("Once upon a time")).toBe(true);
    expect(finished).toEqual(["length", "length"]);
  });

  it("frees the sequence when the client leaves mid-stream", async () => {
    const c = new OpenAI({ baseURL: `${full.baseUrl}/v1`, apiKey: "unused", maxRetries: 0 });
    const stream = await c.chat.completions.create({
      model: "any",
      messages: user("Tell a long story"),
      max_tokens: 900,
      temperature: 1,
      logit_bias: NEVER_ENDS,
      stream: true,
    });
    let pieces = 0;
    for await (const _ of stream) if (++pieces === 3) break;
    expect(pieces).toBe(3);
    // The interactive lane here has room for one and no queue: a stream still generating would make this a 429. Its
    // room is given back as the server sees the connection close, later on a loaded machine than on an idle one.
    await expect.poll(() => defaultLaneRunning(full), { timeout: 5_000, interval: 50 }).toBe(0);
    const next = await c.chat.completions.create({ model: "any", messages: user("Hi"), max_tokens: 4 });
    expect(next.choices[0].message.role).toBe("assistant");
    // The metrics agree: nothing runs or waits in the lane, and the requests that left are counted as such.
    const sample = await metricsOf(full);
    expect(sample("obi_sync_lane_running", 'tier="default"')).toBe(0);
    expect(sample("obi_sync_lane_waiting", 'tier="default"')).toBe(0);
    expect(sample("obi_sync_requests_total", 'tier="default",model="[^"]+",outcome="disconnected"')).toBeGreaterThanOrEqual(1);
    expect(sample("obi_sync_time_to_first_token_seconds_count", 'tier="default"')).toBeGreaterThanOrEqual(1);
  });
});

const python = pythonWith("openai.types.responses") && pythonWith("anthropic.types.messages");
if (!python) console.warn("the Python clients' checks of the synchronous endpoints are skipped: no Python with openai and anthropic");
describe.skipIf(!python)("the official Python clients", () => {
  it("get objects, chunks and events that their pydantic types validate, streaming and not", async () => {
    // Asynchronously: the service answers from this process.
    const run = await promisify(execFile)(python as string, [path.join(repoRoot, "tests/conformance/sync_clients.py"), svc.baseUrl], {
      encoding: "utf8",
      // Inside the test's own minute, so a hang shows what the script printed.
      timeout: 50_000,
    }).catch((e: { stdout?: string; stderr?: string; message: string }) => ({ stdout: e.stdout ?? e.message, stderr: e.stderr ?? "" }));
    expect(run.stdout + run.stderr).toBe("");
  });
});
