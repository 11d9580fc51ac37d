import { describe, expect, it } from "vitest";
import { parseCompletionWindow } from "../../domain/completion-window.js";
import { InvalidRequestError } from "../../domain/errors.js";

describe("parseCompletionWindow", () => {
  it("accepts OpenAI's 24h and other durations", () => {
    expect(parseCompletionWindow("24h")).toBe(86_400);
    expect(parseCompletionWindow("30m")).toBe(1800);
    expect(parseCompletionWindow("2h")).toBe(7200);
    expect(parseCompletionWindow("10s")).toBe(10);
    expect(parseCompletionWindow("1d")).toBe(86_400);
  });

  it.each(["", "24", "h", "0h", "-1h", "1.5h", "24 hours", "1w", "400d", "abc"])("rejects %j with a 400 on completion_window", (s) => {
    let err: unknown;
    try {
      parseCompletionWindow(s);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidRequestError);
    expect((err as InvalidRequestError).param).toBe("completion_window");
  });

  it("rejects non-strings without crashing", () => {
    expect(() => parseCompletionWindow(undefined as unknown as string)).toThrow(InvalidRequestError);
    expect(() => parseCompletionWindow(24 as unknown as string)).toThrow(InvalidRequestError);
  });
});
