// The Responses API's stream: sequence numbers in order, the message item's events around the text told, what was
// not told closing it, a function call's item whole, and the final response under the ids the events announced.
import { describe, expect, it } from "vitest";
import { responseEvents } from "../../openai/response-events.js";

describe("responseEvents", () => {
  it("announces the response and its message, tells text, and closes with the final response's items", () => {
    const s = responseEvents({ id: "resp_1", messageId: "msg_1" });
    const start = s.start({ object: "response", status: "completed", output: [{}], usage: {} });
    expect(start.map((e) => e.type)).toEqual(["response.created", "response.in_progress"]);
    expect(start[0].response).toMatchObject({ id: "resp_1", status: "in_progress", output: [], usage: null });
    const told = s.text("Hel");
    expect(told.map((e) => e.type)).toEqual(["response.output_item.added", "response.content_part.added", "response.output_text.delta"]);
    const end = s.end({
      id: "resp_other",
      status: "completed",
      output: [
        { type: "message", id: "msg_other", content: [{ type: "output_text", text: "Hello" }] },
        { type: "function_call", id: "fc_1", name: "f", arguments: '{"a":1}' },
      ],
    });
    expect(end.map((e) => e.type)).toEqual([
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(end[0].delta).toBe("lo");
    expect(end[4]).toMatchObject({ output_index: 1, item: { id: "fc_1", arguments: "", status: "in_progress" } });
    expect(end.at(-1)?.response).toMatchObject({ id: "resp_1", output: [{ id: "msg_1" }, { id: "fc_1" }] });
    const numbers = [...start, ...told, ...end].map((e) => e.sequence_number);
    expect(numbers).toEqual(numbers.map((_, i) => i));
  });
});
