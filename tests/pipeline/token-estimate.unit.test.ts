import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { DEFAULT_CHAT_TOKENS, DEFAULT_COMPLETION_TOKENS, lineTokens } from "../../pipeline/token-estimate.js";
import { validateBatchFile } from "../../pipeline/validate.js";

describe("lineTokens (the enqueued-token estimate)", () => {
  const chat = (extra: Record<string, unknown> = {}) => ({
    model: "m",
    messages: [
      { role: "system", content: "x".repeat(40) },
      { role: "user", content: [{ type: "text", text: "y".repeat(80) }] },
    ],
    ...extra,
  });

  it("counts a chat's texts at 4 characters a token, 4 a message, and its max_tokens (times n)", () => {
    expect(lineTokens("/v1/chat/completions", chat({ max_tokens: 100 }))).toBe(10 + 20 + 8 + 100);
    expect(lineTokens("/v1/chat/completions", chat({ max_completion_tokens: 50, n: 3 }))).toBe(38 + 150);
    expect(lineTokens("/v1/chat/completions", chat())).toBe(38 + DEFAULT_CHAT_TOKENS);
  });

  it("uses the model's tokenizer where the process has one, and falls back where it answers undefined", () => {
    const seen: string[] = [];
    const count = (model: string, text: string) => {
      seen.push(model);
      return text.length;
    };
    expect(lineTokens("/v1/chat/completions", chat({ max_tokens: 1 }), count)).toBe(40 + 80 + 8 + 1);
    expect(seen).toEqual(["m", "m"]);
    expect(lineTokens("/v1/chat/completions", chat({ max_tokens: 1 }), () => undefined)).toBe(38 + 1);
  });

  it("counts completions' and embeddings' prompts, token ids one each, and embeddings generate nothing", () => {
    expect(lineTokens("/v1/completions", { model: "m", prompt: "z".repeat(8) })).toBe(2 + DEFAULT_COMPLETION_TOKENS);
    expect(lineTokens("/v1/completions", { model: "m", prompt: [1, 2, 3], max_tokens: 4 })).toBe(7);
    expect(lineTokens("/v1/embeddings", { model: "m", input: ["abcd", "efgh", [5, 6]] })).toBe(4);
  });

  it("counts every prompt of a completions list, times n (or best_of), each up to its max_tokens", () => {
    const letters = ["a", "b", "c", "d", "e", "f", "g", "h"];
    expect(lineTokens("/v1/completions", { model: "m", prompt: letters, max_tokens: 200 })).toBe(8 + 8 * 200);
    expect(lineTokens("/v1/completions", { model: "m", prompt: [[1, 2], [3]], max_tokens: 10, n: 3 })).toBe(3 + 2 * 3 * 10);
    expect(lineTokens("/v1/completions", { model: "m", prompt: ["abcd", "efgh"] })).toBe(2 + 2 * DEFAULT_COMPLETION_TOKENS);
    expect(lineTokens("/v1/completions", { model: "m", prompt: "abcd", max_tokens: 10, n: 2, best_of: 5 })).toBe(1 + 5 * 10);
    // One list of token ids is one prompt; chat's messages are one conversation, whatever their number.
    expect(lineTokens("/v1/completions", { model: "m", prompt: [1, 2, 3], max_tokens: 10 })).toBe(3 + 10);
    expect(lineTokens("/v1/chat/completions", chat({ max_tokens: 10, n: 4 }))).toBe(38 + 40);
  });

  it("a batch file's estimate is by model, summed over its valid lines only", async () => {
    const line = (id: string, body: unknown) => JSON.stringify({ custom_id: id, method: "POST", url: "/v1/completions", body });
    const text = [
      line("a", { model: "m", prompt: "abcd", max_tokens: 10 }),
      line("b", { model: "m", prompt: "abcd", max_tokens: 10 }),
      line("b", { model: "m", prompt: "abcd", max_tokens: 10 }),
      "not json",
    ].join("\n");
    const v = await validateBatchFile(Readable.from([Buffer.from(text)]), "/v1/completions", {
      maxRequests: 10,
      maxLineBytes: 1 << 20,
      oneModel: false,
    });
    expect(v.enqueuedTokens).toEqual({ m: 22 });
  });
});
