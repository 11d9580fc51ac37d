import { describe, expect, it } from "vitest";
import { toChatHistory } from "../../engine/generate/chat.js";

describe("toChatHistory", () => {
  it("maps OpenAI roles and ends with an open assistant turn", () => {
    expect(
      toChatHistory([
        { role: "system", content: "s" },
        { role: "developer", content: "d" },
        { role: "user", content: "u" },
        { role: "assistant", content: "a" },
        { role: "tool", content: "t" },
      ]),
    ).toEqual([
      { type: "system", text: "s" },
      { type: "system", text: "d" },
      { type: "user", text: "u" },
      { type: "model", response: ["a"] },
      { type: "user", text: "Tool result:\nt" },
      { type: "model", response: [] },
    ]);
  });

  it("refuses what is not a list of role/content messages", () => {
    expect(() => toChatHistory([])).toThrow(/non-empty/);
    expect(() => toChatHistory([{ role: "robot" as never, content: "x" }])).toThrow(/role/);
    expect(() => toChatHistory([{ role: "user", content: 5 as never }])).toThrow(/content/);
  });
});
