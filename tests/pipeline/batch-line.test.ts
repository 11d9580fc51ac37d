import { describe, expect, it } from "vitest";
import {
  BatchLineSchema,
  chatCall,
  ChatBodySchema,
  completionCall,
  CompletionBodySchema,
  describeIssue,
  embeddingCall,
  EmbeddingBodySchema,
} from "../../pipeline/batch-line.js";

const problem = (schema: { safeParse(v: unknown): any }, value: unknown) => {
  const r = schema.safeParse(value);
  if (r.success) throw new Error("expected a failure");
  return describeIssue(r.error, value);
};

describe("BatchLineSchema", () => {
  it("accepts an OpenAI line and names the field of a bad one", () => {
    expect(BatchLineSchema.safeParse({ custom_id: "a", method: "POST", url: "/v1/completions", body: {} }).success).toBe(true);
    expect(problem(BatchLineSchema, { custom_id: "a", method: "PUT", url: "/v1/completions", body: {} }).param).toBe("method");
    expect(problem(BatchLineSchema, { custom_id: "a".repeat(513), method: "POST", url: "/v1/completions", body: {} }).param).toBe(
      "custom_id",
    );
    expect(problem(BatchLineSchema, { custom_id: "a", method: "POST", url: "/v1/completions" })).toMatchObject({
      missing: true,
      param: "body",
    });
  });
});

describe("chat bodies", () => {
  const base = { model: "m", messages: [{ role: "user", content: "hi" }] };

  it("tolerates OpenAI fields we do not use", () => {
    expect(
      ChatBodySchema.safeParse({ ...base, response_format: { type: "text" }, user: "u", n: 1, stream: false, metadata: {} }).success,
    ).toBe(true);
  });

  it("refuses what cannot be honoured, clearly", () => {
    expect(problem(ChatBodySchema, { ...base, n: 2 }).message).toMatch(/only n=1/);
    expect(problem(ChatBodySchema, { ...base, stream: true }).message).toMatch(/stream/);
    expect(problem(ChatBodySchema, { ...base, top_p: 1.5 }).param).toBe("top_p");
    expect(problem(ChatBodySchema, { ...base, messages: [] }).message).toMatch(/at least one/);
    expect(problem(ChatBodySchema, { ...base, messages: [{ role: "robot", content: "x" }] }).param).toBe("messages[0].role");
    expect(problem(ChatBodySchema, { ...base, seed: 1.5 }).param).toBe("seed");
  });

  it("becomes engine parameters: text parts joined, max_completion_tokens preferred, stop as a list", () => {
    const body = ChatBodySchema.parse({
      messages: [
        {
          role: "system",
          content: [
            { type: "text", text: "a" },
            { type: "text", text: "b" },
          ],
        },
        { role: "assistant", content: null },
        { role: "user", content: "q" },
      ],
      max_tokens: 10,
      max_completion_tokens: 20,
      temperature: 0,
      top_p: 0.5,
      stop: "END",
      seed: 7,
    });
    expect(chatCall(body)).toEqual({
      messages: [
        { role: "system", content: "a\nb" },
        { role: "assistant", content: "" },
        { role: "user", content: "q" },
      ],
      params: { maxTokens: 20, temperature: 0, topP: 0.5, stop: ["END"], seed: 7 },
    });
  });

  it("treats null fields as unset", () => {
    expect(chatCall(ChatBodySchema.parse({ ...base, max_tokens: null, temperature: null, stop: null })).params).toEqual({});
  });
});

describe("completion bodies", () => {
  it("takes a string or an array of strings; refuses token ids and empty arrays", () => {
    expect(completionCall(CompletionBodySchema.parse({ prompt: "x", max_tokens: 3 }))).toEqual({
      prompts: ["x"],
      params: { maxTokens: 3 },
      echo: false,
    });
    expect(completionCall(CompletionBodySchema.parse({ prompt: ["a", "b"], echo: true })).prompts).toEqual(["a", "b"]);
    expect(problem(CompletionBodySchema, { prompt: [] }).param).toBe("prompt");
    expect(problem(CompletionBodySchema, { prompt: [[1, 2]] }).param).toBe("prompt[0]");
    expect(problem(CompletionBodySchema, {})).toMatchObject({ missing: true, param: "prompt" });
    expect(problem(CompletionBodySchema, { prompt: "x", best_of: 3 }).message).toMatch(/best_of=1/);
  });
});

describe("embedding bodies", () => {
  it("takes a non-empty string or list; reads encoding_format and dimensions", () => {
    expect(embeddingCall(EmbeddingBodySchema.parse({ input: "x" }))).toEqual({ inputs: ["x"], encodingFormat: "float" });
    expect(embeddingCall(EmbeddingBodySchema.parse({ input: ["a", "b"], encoding_format: "base64", dimensions: 8 }))).toEqual({
      inputs: ["a", "b"],
      encodingFormat: "base64",
      dimensions: 8,
    });
    expect(problem(EmbeddingBodySchema, { input: "" }).param).toBe("input");
    expect(problem(EmbeddingBodySchema, { input: ["a", ""] }).param).toBe("input[1]");
    expect(problem(EmbeddingBodySchema, { input: "x", encoding_format: "int8" }).param).toBe("encoding_format");
  });
});
