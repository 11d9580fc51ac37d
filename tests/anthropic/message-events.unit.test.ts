// Anthropic's streamed message: message_start with the prompt's usage, the text told as deltas of one text block,
// then what was not told, each tool_use block whole, and message_delta with the stop reason and the usage.
import { describe, expect, it } from "vitest";
import { messageEvents } from "../../anthropic/message-events.js";

describe("messageEvents", () => {
  it("opens with message_start, tells text, closes with the rest, the tool use blocks, message_delta and message_stop", () => {
    const s = messageEvents({ id: "msg_1", model: "m" });
    const types = (events: Array<Record<string, unknown>>) => events.map((e) => e.type);
    expect(types(s.start({ promptTokens: 7, cachedTokens: 2 }))).toEqual(["message_start"]);
    const told = s.text("Hel");
    expect(told).toEqual([
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "", citations: null } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hel" } },
    ]);
    const end = s.end({
      content: [
        { type: "text", text: "Hello" },
        { type: "tool_use", id: "toolu_1", name: "f", input: { a: 1 } },
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 5, output_tokens: 7, cache_read_input_tokens: 2, cache_creation_input_tokens: 0 },
    });
    expect(types(end)).toEqual([
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(end[0].delta).toEqual({ type: "text_delta", text: "lo" });
    expect(end[2]).toMatchObject({ index: 1, content_block: { type: "tool_use", id: "toolu_1", input: {} } });
    expect(end[3].delta).toEqual({ type: "input_json_delta", partial_json: '{"a":1}' });
    expect(end[5]).toMatchObject({ delta: { stop_reason: "tool_use" }, usage: { input_tokens: 5, output_tokens: 7 } });
  });

  it("counts the prompt in message_start as Anthropic does, the cached part apart, and names the tier there", () => {
    // Clients record the input tokens from message_start, and the final message's usage is message_start's as
    // message_delta updates it: the tier is there or nowhere.
    const [start] = messageEvents({ id: "msg_1", model: "m" }).start({ promptTokens: 30, cachedTokens: 12 });
    expect(start.message.usage).toEqual({
      input_tokens: 18,
      output_tokens: 0,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 12,
      cache_creation: null,
      server_tool_use: null,
      service_tier: "standard",
      inference_geo: null,
    });
  });
});
