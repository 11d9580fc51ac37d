// The Responses <-> chat translation: which chat request a Responses body becomes, how refusals are named in
// Responses terms, and the response object built from a chat completion.
import { describe, expect, it } from "vitest";
import { parseRequest } from "../../openai/parse.js";
import type { ResponseBody } from "../../openai/response-bodies.js";
import { responsesParam, toChatBody, toResponseObject } from "../../openai/responses.js";

const body = (b: object) => parseRequest("/v1/responses", b).body as ResponseBody;

describe("toChatBody", () => {
  it("puts instructions first, merges consecutive function calls into one assistant turn, and maps the fields", () => {
    const { chat, origins } = toChatBody(
      body({
        instructions: "Be brief.",
        input: [
          { role: "user", content: "Weather in Paris and Rome?" },
          { type: "function_call", call_id: "a", name: "w", arguments: '{"c":"Paris"}' },
          { type: "function_call", call_id: "b", name: "w", arguments: '{"c":"Rome"}' },
          { type: "function_call_output", call_id: "a", output: "20" },
          { type: "function_call_output", call_id: "b", output: "25" },
        ],
        max_output_tokens: 50,
        temperature: 0.3,
        top_p: 0.9,
        tools: [{ type: "function", name: "w", parameters: { type: "object" }, strict: true }],
        tool_choice: { type: "function", name: "w" },
        parallel_tool_calls: false,
        text: { format: { type: "json_object" } },
      }),
    );
    expect(chat.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "tool"]);
    const assistant = chat.messages[2] as { tool_calls: Array<{ id: string }> };
    expect(assistant.tool_calls.map((c) => c.id)).toEqual(["a", "b"]);
    expect(origins.map((o) => o.path)).toEqual(["instructions", "input[0]", "input[1]", "input[3]", "input[4]"]);
    expect(origins[2].calls).toEqual(["input[1]", "input[2]"]);
    expect(chat).toMatchObject({
      max_completion_tokens: 50,
      temperature: 0.3,
      top_p: 0.9,
      tools: [{ type: "function", function: { name: "w", parameters: { type: "object" }, strict: true } }],
      tool_choice: { type: "function", function: { name: "w" } },
      parallel_tool_calls: false,
      response_format: { type: "json_object" },
    });
  });

  it("asks for log probabilities when include or top_logprobs does", () => {
    expect(toChatBody(body({ input: "x", include: ["message.output_text.logprobs"], top_logprobs: 3 })).chat).toMatchObject({
      logprobs: true,
      top_logprobs: 3,
    });
  });

  it("refuses by the Responses name what it cannot carry", () => {
    const refusal = (b: object) => {
      try {
        toChatBody(body(b));
      } catch (err: any) {
        return { code: err.code, param: err.param };
      }
      throw new Error("expected a refusal");
    };
    expect(refusal({ input: "x", previous_response_id: "resp_1" })).toEqual({
      code: "unsupported_parameter",
      param: "previous_response_id",
    });
    expect(refusal({ input: "x", truncation: "auto" })).toEqual({ code: "unsupported_value", param: "truncation" });
    expect(refusal({ input: "x", include: ["file_search_call.results"] })).toEqual({ code: "unsupported_value", param: "include" });
    expect(refusal({ input: [{ type: "reasoning", id: "r", summary: [] }] })).toEqual({
      code: "unsupported_value",
      param: "input[0].type",
    });
    expect(refusal({ input: "x", tools: [{ type: "file_search", vector_store_ids: [] }] })).toEqual({
      code: "unsupported_value",
      param: "tools[0].type",
    });
    expect(refusal({ input: "x", text: { verbosity: "low" } })).toEqual({ code: "unsupported_parameter", param: "text.verbosity" });
  });
});

describe("responsesParam", () => {
  const origins = [
    { path: "instructions", calls: [] },
    { path: "input[0]", calls: [] },
    { path: "input[1]", calls: ["input[1]", "input[2]"] },
  ];
  it.each([
    ["max_completion_tokens", "max_output_tokens"],
    ["response_format.json_schema.schema", "text.format.schema"],
    ["response_format", "text.format"],
    ["tools[2].function.parameters", "tools[2].parameters"],
    ["tool_choice.function.name", "tool_choice.name"],
    ["logprobs", "top_logprobs"],
    ["messages[1].content[0]", "input[0].content[0]"],
    ["messages[2].tool_calls[1].function.arguments", "input[2].arguments"],
    ["messages[2].tool_calls[0].id", "input[1].call_id"],
    ["temperature", "temperature"],
  ])("%s is reported as %s", (chat, responses) => {
    expect(responsesParam(chat, origins)).toBe(responses);
  });
});

describe("toResponseObject", () => {
  const completion = (
    message: { content: string | null; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }> },
    finish_reason: string,
  ) => ({
    id: "chatcmpl-1",
    created: 1_700_000_000,
    model: "served",
    choices: [{ message, logprobs: null, finish_reason }],
    usage: { prompt_tokens: 10, completion_tokens: 4, prompt_tokens_details: { cached_tokens: 3 } },
  });
  it("a text answer is one message item with output_text; a cut one is incomplete", () => {
    const r: any = toResponseObject(body({ input: "x", max_output_tokens: 4 }), completion({ content: "Hi" }, "length"));
    expect(r).toMatchObject({
      object: "response",
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
      model: "served",
      output: [
        { type: "message", role: "assistant", status: "incomplete", content: [{ type: "output_text", text: "Hi", annotations: [] }] },
      ],
      usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 3 }, output_tokens: 4, total_tokens: 14 },
    });
  });
  it("tool calls are function_call items that keep the call ids", () => {
    const calls = [{ id: "call_x", type: "function", function: { name: "w", arguments: "{}" } }];
    const r: any = toResponseObject(body({ input: "x" }), completion({ content: null, tool_calls: calls }, "tool_calls"));
    expect(r.status).toBe("completed");
    expect(r.output).toEqual([
      { type: "function_call", id: expect.stringMatching(/^fc_/), call_id: "call_x", name: "w", arguments: "{}", status: "completed" },
    ]);
  });
});
