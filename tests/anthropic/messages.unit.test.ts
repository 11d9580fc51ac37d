// The Messages <-> chat translation: which chat request Anthropic's params become, how refusals are named in
// Messages terms, and the `message` built from a chat completion (stop reasons, cached tokens, cut tool calls).
import { describe, expect, it } from "vitest";
import { messagesParam, toAnthropicMessage, toChatFromMessages } from "../../anthropic/messages.js";
import type { MessagesParams } from "../../anthropic/params.js";
import { parseRequest } from "../../parse/request.js";

const params = (p: object) => parseRequest("/v1/messages", { model: "m", max_tokens: 10, ...p }).body as MessagesParams;

describe("toChatFromMessages", () => {
  it("puts the system first, a turn's tool results before its text, and maps the sampling and tool fields", () => {
    const { chat, topK, origins } = toChatFromMessages(
      params({
        system: [
          { type: "text", text: "Be brief." },
          { type: "text", text: "Be kind." },
        ],
        messages: [
          { role: "user", content: "Weather?" },
          {
            role: "assistant",
            content: [
              { type: "text", text: "Looking." },
              { type: "tool_use", id: "t1", name: "w", input: { c: "Paris" } },
              { type: "tool_use", id: "t2", name: "w", input: { c: "Rome" } },
            ],
          },
          {
            role: "user",
            content: [
              { type: "text", text: "Well?" },
              { type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "20" }] },
              { type: "tool_result", tool_use_id: "t2", content: "no data", is_error: true },
            ],
          },
        ],
        stop_sequences: ["END"],
        temperature: 0.5,
        top_p: 0.8,
        top_k: 7,
        tools: [{ name: "w", description: "weather", input_schema: { type: "object" } }],
        tool_choice: { type: "auto", disable_parallel_tool_use: true },
      }),
    );
    expect(chat).toMatchObject({
      model: "m",
      max_tokens: 10,
      stop: ["END"],
      temperature: 0.5,
      top_p: 0.8,
      tool_choice: "auto",
      parallel_tool_calls: false,
    });
    expect(topK).toBe(7);
    expect(chat.tools).toEqual([{ type: "function", function: { name: "w", description: "weather", parameters: { type: "object" } } }]);
    expect(chat.messages).toEqual([
      { role: "system", content: "Be brief.\nBe kind." },
      { role: "user", content: "Weather?" },
      {
        role: "assistant",
        content: "Looking.",
        tool_calls: [
          { id: "t1", type: "function", function: { name: "w", arguments: '{"c":"Paris"}' } },
          { id: "t2", type: "function", function: { name: "w", arguments: '{"c":"Rome"}' } },
        ],
      },
      { role: "tool", tool_call_id: "t1", content: "20" },
      { role: "tool", tool_call_id: "t2", content: "Error: no data" },
      { role: "user", content: "Well?" },
    ]);
    expect(origins.map((o) => o.path)).toEqual([
      "system",
      "messages[0]",
      "messages[1]",
      "messages[2].content[1]",
      "messages[2].content[2]",
      "messages[2]",
    ]);
    expect(messagesParam("messages[2].tool_calls[1].function.arguments", origins)).toBe("messages[1].content[2].input");
    expect(messagesParam("messages[3].tool_call_id", origins)).toBe("messages[2].content[1].tool_use_id");
  });

  it("maps tool_choice any, tool and none, and JSON output", () => {
    const tools = [{ name: "w", input_schema: { type: "object" } }];
    const choice = (tool_choice: object) =>
      toChatFromMessages(params({ messages: [{ role: "user", content: "x" }], tools, tool_choice })).chat;
    expect(choice({ type: "any" }).tool_choice).toBe("required");
    expect(choice({ type: "none" }).tool_choice).toBe("none");
    expect(choice({ type: "tool", name: "w" }).tool_choice).toEqual({ type: "function", function: { name: "w" } });
    const schema = { type: "object", properties: { a: { type: "string" } } };
    const { chat } = toChatFromMessages(
      params({ messages: [{ role: "user", content: "x" }], output_config: { format: { type: "json_schema", schema } } }),
    );
    expect(chat.response_format).toEqual({ type: "json_schema", json_schema: { name: "output", schema, strict: true } });
  });

  it("refuses what it cannot carry, naming the Messages field", () => {
    const refused = (p: object) => {
      try {
        toChatFromMessages(params({ messages: [{ role: "user", content: "x" }], ...p }));
      } catch (e) {
        return (e as { param: string }).param;
      }
      return "accepted";
    };
    expect(refused({ messages: [{ role: "user", content: [{ type: "document", source: {} }] }] })).toBe("messages[0].content[0].type");
    expect(
      refused({
        messages: [
          { role: "user", content: "x" },
          { role: "assistant", content: [{ type: "thinking", thinking: "", signature: "" }] },
          { role: "user", content: "y" },
        ],
      }),
    ).toBe("messages[1].content[0].type");
    expect(
      refused({
        messages: [
          { role: "user", content: "x" },
          { role: "assistant", content: "prefill" },
        ],
      }),
    ).toBe("messages[1]");
    expect(refused({ thinking: { type: "adaptive" } })).toBe("thinking.type");
    expect(refused({ output_config: { effort: "high" } })).toBe("output_config.effort");
    expect(refused({ mcp_servers: [{ type: "url", url: "http://x", name: "x" }] })).toBe("mcp_servers");
    expect(refused({ container: "c" })).toBe("container");
    expect(refused({ tools: [{ type: "bash_20250124", name: "bash" }] })).toBe("tools[0].type");
    expect(refused({ tools: [{ name: "w", input_schema: { type: "object" }, input_examples: [{}] }] })).toBe("tools[0].input_examples");
    expect(refused({ stream: true })).toBe("stream");
    expect(refused({ thinking: { type: "disabled" }, mcp_servers: [], stream: false })).toBe("accepted");
  });

  it("names chat-side refusals in Messages terms", () => {
    expect(messagesParam("stop", [])).toBe("stop_sequences");
    expect(messagesParam("tools[1].function.parameters.properties", [])).toBe("tools[1].input_schema.properties");
    expect(messagesParam("tools[0].function.name", [])).toBe("tools[0].name");
    expect(messagesParam("tool_choice.function.name", [])).toBe("tool_choice.name");
    expect(messagesParam("parallel_tool_calls", [])).toBe("tool_choice.disable_parallel_tool_use");
    expect(messagesParam("response_format.json_schema.schema.pattern", [])).toBe("output_config.format.schema.pattern");
    expect(messagesParam("max_tokens", [])).toBe("max_tokens");
  });
});

describe("toAnthropicMessage", () => {
  const completion = (message: object, finish_reason: string, cached = 0) => ({
    model: "served",
    choices: [{ message: { content: null, ...message }, finish_reason }],
    usage: { prompt_tokens: 30, completion_tokens: 5, prompt_tokens_details: { cached_tokens: cached } },
  });

  it("maps finish reasons, names the stop string, and counts a cached prefix apart", () => {
    const m = toAnthropicMessage(completion({ content: "Hi" }, "stop", 12), { stops: ["END"] });
    expect(m).toMatchObject({ type: "message", role: "assistant", model: "served", stop_reason: "stop_sequence", stop_sequence: "END" });
    expect(m.content).toEqual([{ type: "text", text: "Hi", citations: null }]);
    expect(m.usage).toMatchObject({ input_tokens: 18, cache_read_input_tokens: 12, cache_creation_input_tokens: 0, output_tokens: 5 });
    expect(toAnthropicMessage(completion({ content: "Hi" }, "stop"), { stops: [null] })).toMatchObject({
      stop_reason: "end_turn",
      stop_sequence: null,
    });
    expect(toAnthropicMessage(completion({ content: "Hi" }, "stop"), {})).toMatchObject({ stop_reason: "end_turn" });
    expect(toAnthropicMessage(completion({ content: "Hi" }, "length"), {})).toMatchObject({ stop_reason: "max_tokens" });
  });

  it("gives tool calls as tool_use blocks; a call cut before its arguments parse is left out", () => {
    const calls = [
      { id: "c1", function: { name: "w", arguments: '{"c":"Paris"}' } },
      { id: "c2", function: { name: "w", arguments: '{"c":"Ro' } },
    ];
    const m = toAnthropicMessage(completion({ tool_calls: calls }, "length"), {});
    expect(m.stop_reason).toBe("max_tokens");
    expect(m.content).toEqual([
      { type: "tool_use", id: expect.stringMatching(/^toolu_[0-9a-f]{24}$/), name: "w", input: { c: "Paris" }, caller: { type: "direct" } },
    ]);
    expect(toAnthropicMessage(completion({ content: "Sure.", tool_calls: calls.slice(0, 1) }, "tool_calls"), {})).toMatchObject({
      stop_reason: "tool_use",
      content: [
        { type: "text", text: "Sure." },
        { type: "tool_use", name: "w" },
      ],
    });
  });
});
