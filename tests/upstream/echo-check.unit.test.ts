// An upstream's answer to a completion with echo: passed on where it echoes (the prompt opens each choice's text and,
// with logprobs, the prompt's log probabilities open its list, as vLLM answers), refused naming `echo` where the
// server ignored it (llama-server answers the completion alone).
import { describe, expect, it } from "vitest";
import { ignoredEcho } from "../../upstream/echo-check.js";

const echoed = (text: string, tokens: number) => ({
  text,
  logprobs: { tokens: Array(tokens).fill("x"), token_logprobs: [null, ...Array(tokens - 1).fill(-1)], top_logprobs: [], text_offset: [] },
});

describe("ignoredEcho", () => {
  it("passes answers that echo, and requests without echo", () => {
    const request = { prompt: ["The cat", "The dog"], echo: true, logprobs: 1, max_tokens: 0 };
    expect(ignoredEcho(request, { choices: [echoed("The cat", 3), echoed("The dog", 3)] })).toBeUndefined();
    expect(ignoredEcho({ prompt: [[1, 2, 3]], echo: true, logprobs: 1 }, { choices: [echoed("abc d", 4)] })).toBeUndefined();
    expect(
      ignoredEcho({ prompt: "The cat", echo: true, n: 2 }, { choices: [{ text: "The cat sat" }, { text: "The cat ran" }] }),
    ).toBeUndefined();
    expect(ignoredEcho({ prompt: "The cat" }, { choices: [{ text: " sat" }] })).toBeUndefined();
  });

  it("refuses, naming echo, an answer without the prompt or without its log probabilities", () => {
    // llama-server's answer: the completion alone, its log probabilities in the chat shape.
    const llamaServer = { choices: [{ text: ",", index: 0, logprobs: { content: [{ token: ",", logprob: -0.03 }] } }] };
    const refusal = ignoredEcho({ prompt: "Once upon a time", echo: true, logprobs: 1, max_tokens: 0 }, llamaServer);
    expect(refusal).toMatchObject({ code: "unsupported_value", param: "echo", retryable: false });
    expect(refusal?.message).toMatch(/ignored 'echo'/);
    expect(ignoredEcho({ prompt: [[1, 2, 3]], echo: true, logprobs: 1 }, llamaServer)).toMatchObject({ param: "echo" });
    // The second prompt's choices (n of them each) are checked against the second prompt.
    const n2 = { prompt: ["The cat", "The dog"], echo: true, n: 2 };
    const texts = ["The cat a", "The cat b", "The dog a", "sat"].map((text, index) => ({ text, index }));
    expect(ignoredEcho(n2, { choices: texts })).toMatchObject({ param: "echo" });
  });
});
