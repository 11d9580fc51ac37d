// The bound on one answer's logprob entries: n × max_tokens × (1 + top_logprobs), checked at parse (a max_tokens
// the request sets) and by the engine (the context where it sets none), for chat and completions alike.
import { describe, expect, it } from "vitest";
import { checkAnswerSize, MAX_ANSWER_LOGPROBS } from "../../openai/answer-size.js";
import { parseRequest } from "../../openai/parse.js";

const chat = (extra: Record<string, unknown>) => ({ model: "m", messages: [{ role: "user", content: "hi" }], ...extra });
const refusal = (work: () => unknown) => {
  try {
    work();
  } catch (err) {
    return err as { code: string; param: string; message: string };
  }
  return undefined;
};

describe("the bound on one answer's logprobs", () => {
  it("refuses the reported request (n 128, max_tokens 900, top_logprobs 20), naming the parameters that multiply", () => {
    const err = refusal(() => parseRequest("/v1/chat/completions", chat({ max_tokens: 900, n: 128, logprobs: true, top_logprobs: 20 })));
    expect(err).toMatchObject({ code: "invalid_request", param: "max_tokens" });
    expect(err?.message).toContain("n (128) × max_tokens (900) × (1 + top_logprobs (20))");
    expect(err?.message).toContain(String(MAX_ANSWER_LOGPROBS));
  });

  it("takes what fits, and answers without logprobs whatever their size", () => {
    expect(() => parseRequest("/v1/chat/completions", chat({ max_tokens: 4096, logprobs: true, top_logprobs: 20 }))).not.toThrow();
    expect(() => parseRequest("/v1/chat/completions", chat({ max_tokens: 900, n: 128 }))).not.toThrow();
    expect(() => parseRequest("/v1/completions", { model: "m", prompt: "x", max_tokens: 900, n: 128 })).not.toThrow();
  });

  it("counts max_completion_tokens, completions' logprobs, and the context where no max_tokens is set", () => {
    expect(
      refusal(() => parseRequest("/v1/chat/completions", chat({ max_completion_tokens: 2000, n: 16, logprobs: true, top_logprobs: 10 }))),
    ).toMatchObject({ param: "max_completion_tokens" });
    const completion = { model: "m", prompt: "x", n: 64, logprobs: 5 };
    expect(refusal(() => parseRequest("/v1/completions", { ...completion, max_tokens: 1000 }))).toMatchObject({ param: "max_tokens" });
    // Each prompt of a list gets its n choices.
    const many = { model: "m", prompt: Array.from({ length: 100 }, (_, i) => `p${i}`), max_tokens: 1000, logprobs: 5 };
    const err = refusal(() => parseRequest("/v1/completions", many));
    expect(err?.message).toContain("prompts (100) × n (1) × max_tokens (1000) × (1 + logprobs (5))");
    expect(() => parseRequest("/v1/completions", { ...many, prompt: Array.from({ length: 1000 }, (_, i) => i) })).not.toThrow();
    // Without max_tokens a completion makes 16 tokens, OpenAI's default.
    expect(() => parseRequest("/v1/completions", completion)).not.toThrow();
    // A chat without max_tokens may fill the context: the engine checks with its size.
    const open = parseRequest("/v1/chat/completions", chat({ n: 64, logprobs: true, top_logprobs: 5 }));
    expect(refusal(() => checkAnswerSize(open, 1024))).toMatchObject({ code: "invalid_request", param: "max_tokens" });
    expect(() => checkAnswerSize(open, 512)).not.toThrow();
    // An echoed prompt is scored too: the context bounds prompt and answer.
    const echo = parseRequest("/v1/completions", { ...completion, echo: true, max_tokens: 1 });
    expect(refusal(() => checkAnswerSize(echo, 1024))).toMatchObject({ param: "max_tokens" });
  });
});
