// Streamed chunks: the pieces told as they came, then each choice's closing chunk with what was not told (a
// tool call, a cut), its finish_reason, and the usage chunk when asked for.
import { describe, expect, it } from "vitest";
import { chunkStream } from "../../openai/stream-chunks.js";

const meta = { id: "chatcmpl-1", created: 1, model: "m", serviceTier: "default", includeUsage: true };

describe("chunkStream", () => {
  it("tells chat pieces with the role first, then closes each choice from the final body, then the usage", () => {
    const s = chunkStream("/v1/chat/completions", meta);
    const first = s.text(0, "Hel");
    const second = s.text(0, "lo");
    expect(first).toMatchObject({
      object: "chat.completion.chunk",
      usage: null,
      choices: [{ index: 0, delta: { role: "assistant", content: "Hel" } }],
    });
    expect(second.choices[0].delta).toEqual({ content: "lo" });
    const calls = [{ id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }];
    const end = s.end({
      choices: [
        { index: 0, message: { content: "Hello there" }, finish_reason: "stop" },
        { index: 1, message: { content: null, tool_calls: calls }, finish_reason: "tool_calls" },
      ],
      usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
    });
    expect(end[0].choices[0]).toMatchObject({ index: 0, delta: { content: " there" }, finish_reason: "stop" });
    expect(end[1].choices[0]).toMatchObject({
      index: 1,
      delta: { role: "assistant", tool_calls: [{ index: 0, ...calls[0] }] },
      finish_reason: "tool_calls",
    });
    expect(end[2]).toMatchObject({ choices: [], usage: { total_tokens: 7 } });
  });

  it("tells completion pieces by index (no service_tier: a Completion has none), without a usage chunk unless asked", () => {
    const s = chunkStream("/v1/completions", { ...meta, id: "cmpl-1", includeUsage: false });
    expect(s.text(1, "Once")).toEqual({
      id: "cmpl-1",
      object: "text_completion",
      created: 1,
      model: "m",
      choices: [{ text: "Once", index: 1, logprobs: null, finish_reason: null }],
    });
    const end = s.end({ choices: [{ index: 1, text: "Once upon", finish_reason: "length" }], usage: {} });
    expect(end).toHaveLength(1);
    expect(end[0].choices[0]).toMatchObject({ text: " upon", finish_reason: "length" });
  });
});
