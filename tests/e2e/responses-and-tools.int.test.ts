// /v1/responses batches and chat tool calls through the real service and the official `openai` client, on
// the generated model (its template has a tool-call format): every output line read with the SDK's types.
import { Ajv } from "ajv";
import OpenAI, { toFile } from "openai";
import type { Response as OpenAIResponse } from "openai/resources/responses/responses";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { openaiClient, startTestService, type TestService, waitForClientBatch } from "../helpers/service.js";

let svc: TestService;
let client: OpenAI;
beforeAll(async () => {
  svc = await startTestService({ MODEL_PATH: await ensureGeneratedModel(), CONTEXT_SIZE: "1024" });
  client = openaiClient(svc);
});
afterAll(async () => svc?.close());

type Line = { custom_id: string; response: { status_code: number; body: any } };

async function runBatch(endpoint: "/v1/responses" | "/v1/chat/completions", bodies: Record<string, object>) {
  const lines = Object.entries(bodies).map(([id, body]) =>
    JSON.stringify({ custom_id: id, method: "POST", url: endpoint, body: { model: "m", ...body } }),
  );
  const file = await client.files.create({ file: await toFile(Buffer.from(`${lines.join("\n")}\n`), "in.jsonl"), purpose: "batch" });
  const created = await client.batches.create({ input_file_id: file.id, endpoint, completion_window: "24h" });
  const batch = await waitForClientBatch(client, created.id, 60000);
  expect(batch.status, JSON.stringify(batch.errors)).toBe("completed");
  const read = async (id: string | null | undefined): Promise<Line[]> =>
    id
      ? (await (await client.files.content(id)).text())
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
      : [];
  const all = [...(await read(batch.output_file_id)), ...(await read(batch.error_file_id))];
  expect(all).toHaveLength(lines.length);
  return { batch, byId: new Map(all.map((l) => [l.custom_id, l.response])) };
}

const weather = {
  type: "object",
  properties: { city: { type: "string", enum: ["Paris", "Rome"] }, celsius: { type: "boolean" } },
  required: ["city", "celsius"],
  additionalProperties: false,
};
const validWeather = new Ajv().compile(weather);
const textOf = (r: OpenAIResponse) =>
  r.output
    .flatMap((item) => (item.type === "message" ? item.content.flatMap((c) => (c.type === "output_text" ? [c.text] : [])) : []))
    .join("");

describe("/v1/responses batches", () => {
  it("answers each line with a response object, honouring its fields, and refuses what it cannot by the Responses name", async () => {
    const { batch, byId } = await runBatch("/v1/responses", {
      string: { input: "Once upon a time", max_output_tokens: 6, temperature: 0 },
      items: {
        instructions: "Answer briefly.",
        input: [
          { role: "user", content: [{ type: "input_text", text: "Hi there" }] },
          { type: "message", role: "assistant", content: [{ type: "output_text", text: "Hello!", annotations: [] }] },
          { role: "user", content: "How are you?" },
        ],
        max_output_tokens: 5,
        top_p: 0,
      },
      schema: {
        input: "Weather as JSON",
        max_output_tokens: 100,
        text: { format: { type: "json_schema", name: "weather", schema: weather, strict: true } },
      },
      tools: {
        input: "Weather in Paris?",
        tools: [{ type: "function", name: "get_weather", parameters: weather, strict: true }],
        tool_choice: "required",
      },
      followup: {
        input: [
          { role: "user", content: "Weather in Paris?" },
          { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris","celsius":true}' },
          { type: "function_call_output", call_id: "call_1", output: '{"temperature": 21}' },
        ],
        tools: [{ type: "function", name: "get_weather", parameters: weather }],
        tool_choice: "none",
        max_output_tokens: 4,
      },
      image: { input: [{ role: "user", content: [{ type: "input_image", image_url: "https://example.com/x.png" }] }] },
      reasoning: { input: "x", reasoning: { effort: "low" } },
      pattern: { input: "x", text: { format: { type: "json_schema", name: "p", schema: { type: "string", pattern: "^a" } } } },
      unanswered: {
        input: [
          { role: "user", content: "x" },
          { type: "function_call", call_id: "c9", name: "f", arguments: "{}" },
        ],
      },
      unknown: { input: "x", seed: 3 },
    });
    expect(batch.request_counts).toEqual({ completed: 5, failed: 5, total: 10 });
    expect(batch.model).toBe(svc.service.backend.info.model);

    const ok = (id: string): OpenAIResponse => {
      expect(byId.get(id)!.status_code, id).toBe(200);
      const r = byId.get(id)!.body as OpenAIResponse;
      expect(r.object).toBe("response");
      expect(r.id).toMatch(/^resp_/);
      expect(r.model).toBe(svc.service.backend.info.model);
      expect(r.usage!.total_tokens).toBe(r.usage!.input_tokens + r.usage!.output_tokens);
      return r;
    };
    const short = ok("string");
    expect(short.status).toBe("incomplete");
    expect(short.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(short.usage!.output_tokens).toBe(6);
    expect(short.max_output_tokens).toBe(6);
    expect(short.output[0]).toMatchObject({ type: "message", role: "assistant", status: "incomplete" });
    const items = ok("items");
    expect(items.instructions).toBe("Answer briefly.");
    expect(items.usage!.output_tokens).toBeLessThanOrEqual(5);
    // The instructions and all three items reached the model.
    expect(items.usage!.input_tokens).toBeGreaterThan(short.usage!.input_tokens + 10);

    const structured = ok("schema");
    expect(structured.status).toBe("completed");
    expect(validWeather(JSON.parse(textOf(structured))), textOf(structured)).toBe(true);
    expect(structured.text?.format).toMatchObject({ type: "json_schema", name: "weather" });

    const called = ok("tools");
    const calls = called.output.filter((o) => o.type === "function_call");
    expect(calls.length).toBeGreaterThanOrEqual(1);
    for (const call of calls) {
      expect(call).toMatchObject({ type: "function_call", name: "get_weather", status: "completed" });
      expect(call.call_id).toMatch(/^call_/);
      expect(validWeather(JSON.parse(call.arguments))).toBe(true);
    }
    const followup = ok("followup");
    expect(followup.output.every((o) => o.type === "message")).toBe(true);

    const refused = (id: string) => {
      const r = byId.get(id)!;
      expect(r.status_code, id).toBe(400);
      return r.body.error as OpenAI.ErrorObject;
    };
    expect(refused("image")).toMatchObject({ code: "unsupported_value", param: "input[0].content[0]" });
    expect(refused("reasoning")).toMatchObject({ code: "unsupported_parameter", param: "reasoning" });
    expect(refused("pattern")).toMatchObject({ code: "unsupported_value", param: "text.format.schema" });
    expect(refused("unanswered")).toMatchObject({ code: "invalid_request", param: "input[1].call_id" });
    expect(refused("unknown")).toMatchObject({ code: "unknown_parameter", param: "seed" });
  });
});

describe("chat tool calls through the service", () => {
  it("returns tool_calls that the SDK reads and that validate, and answers a follow-up with the tool's result", async () => {
    const tools = [{ type: "function", function: { name: "get_weather", parameters: weather } }];
    const ask = [{ role: "user", content: "Weather in Rome?" }];
    const { byId } = await runBatch("/v1/chat/completions", {
      required: { messages: ask, tools, tool_choice: "required", parallel_tool_calls: false },
      named: { messages: ask, tools, tool_choice: { type: "function", function: { name: "get_weather" } }, temperature: 1.2, seed: 9 },
      followup: {
        messages: [
          ...ask,
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Rome","celsius":true}' } },
            ],
          },
          { role: "tool", tool_call_id: "call_a", content: '{"temperature": 25}' },
        ],
        tools,
        max_tokens: 4,
      },
    });
    for (const id of ["required", "named"]) {
      const completion = byId.get(id)!.body as OpenAI.ChatCompletion;
      const [choice] = completion.choices;
      expect(choice.finish_reason, id).toBe("tool_calls");
      const calls = choice.message.tool_calls ?? [];
      expect(calls).toHaveLength(1);
      const call = calls[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(call.function.name).toBe("get_weather");
      expect(validWeather(JSON.parse(call.function.arguments)), call.function.arguments).toBe(true);
    }
    const followup = byId.get("followup")!.body as OpenAI.ChatCompletion;
    expect(followup.choices[0].message.role).toBe("assistant");
    expect(followup.usage!.prompt_tokens).toBeGreaterThan(0);
  });

  it("refuses a batch for an endpoint this deployment does not serve, saying which it serves", async () => {
    const file = await client.files.create({
      file: await toFile(
        Buffer.from(`${JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/moderations", body: { input: "x" } })}\n`),
        "m.jsonl",
      ),
      purpose: "batch",
    });
    const err = await client.batches
      .create({ input_file_id: file.id, endpoint: "/v1/moderations", completion_window: "24h" })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.param).toBe("endpoint");
    expect(err.message).toMatch(/serves .*\/v1\/responses.*; a batch for '\/v1\/moderations' cannot run here/);
  });
});
