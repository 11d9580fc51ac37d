// The words servers use for a request past their context, read into OpenAI's refusal. The bodies are those the
// servers send (vLLM's and OpenAI's sentences, verbatim in shape); llama-server's own are checked on the real
// server in llama-server.sys.test.ts.
import { describe, expect, it } from "vitest";
import { contextCut, contextRefusal, probeContext, reportedContext } from "../../upstream/context-limit.js";

const vllm = (prompt: number, completion: number) => ({
  object: "error",
  message: `This model's maximum context length is 2048 tokens. However, you requested ${prompt + completion} tokens (${prompt} in the messages, ${completion} in the completion). Please reduce the length of the messages or completion.`,
  type: "BadRequestError",
  param: null,
  code: 400,
});

describe("an upstream's refusal", () => {
  it("names the limit the line set when the prompt fits, and the prompt when it alone does not (vLLM's words)", () => {
    const limit = contextRefusal("/v1/chat/completions", { max_tokens: 100_000 }, { error: vllm(10, 100_000) });
    expect(limit).toMatchObject({ code: "context_length_exceeded", param: "max_tokens", retryable: false });
    expect(limit?.message).toMatch(/maximum context length is 2048/);
    const prompt = contextRefusal("/v1/chat/completions", { max_tokens: 10 }, { error: vllm(2990, 10) });
    expect(prompt).toMatchObject({ code: "context_length_exceeded", param: "messages" });
    expect(prompt?.message).toMatch(/resulted in 2990 tokens/);
    expect(reportedContext({ error: vllm(10, 10) })).toBe(2048);
  });

  it("keeps the field OpenAI itself named, and leaves every other refusal alone", () => {
    const openai = { error: { message: "Too long.", type: "invalid_request_error", param: "messages", code: "context_length_exceeded" } };
    expect(contextRefusal("/v1/chat/completions", { max_tokens: 5 }, openai)).toMatchObject({ param: "messages" });
    expect(
      contextRefusal(
        "/v1/embeddings",
        {},
        { error: { type: "exceed_context_size_error", n_prompt_tokens: 900, n_ctx: 512, message: "x" } },
      ),
    ).toMatchObject({
      param: "input",
      code: "context_length_exceeded",
    });
    expect(
      contextRefusal("/v1/completions", {}, { error: { message: "Prompt contains invalid tokens", type: "invalid_request_error" } }),
    ).toBeUndefined();
    expect(contextRefusal("/v1/completions", {}, "Bad Request")).toBeUndefined();
  });
});

describe("an answer cut by the context", () => {
  const answer = (completion: number, choices = 1) => ({
    choices: Array.from({ length: choices }, () => ({ finish_reason: "length" })),
    usage: { prompt_tokens: 6, completion_tokens: completion },
  });
  const context = (n: number | undefined) => async () => n;

  it("is refused when it stopped at the context short of max_tokens", async () => {
    const cut = await contextCut("/v1/completions", { max_tokens: 100_000 }, answer(250), context(256));
    expect(cut).toMatchObject({ code: "context_length_exceeded", param: "max_tokens" });
    expect(cut?.message).toMatch(/maximum context length is 256 tokens.*6 in the prompt, 100000 in max_tokens/);
  });

  it("is kept when it reached max_tokens, stopped short of the context (a server's own cap), held several choices, or the context is unknown", async () => {
    expect(await contextCut("/v1/completions", { max_tokens: 250 }, answer(250), context(256))).toBeUndefined();
    expect(await contextCut("/v1/completions", { max_tokens: 300 }, answer(5), context(256))).toBeUndefined();
    expect(await contextCut("/v1/completions", { max_tokens: 300, n: 2 }, answer(250, 2), context(256))).toBeUndefined();
    expect(await contextCut("/v1/completions", { max_tokens: 300 }, answer(250), context(undefined))).toBeUndefined();
    expect(await contextCut("/v1/completions", {}, answer(250), context(256))).toBeUndefined();
  });

  it("learns the context from llama-server's /props, else vLLM's max_model_len", async () => {
    const routes: Record<string, unknown> = { "/props": { default_generation_settings: { n_ctx: 256 } } };
    expect(await probeContext(async (p) => routes[p], "/v1", "m")).toBe(256);
    const vllmRoutes: Record<string, unknown> = {
      "/v1/models": {
        data: [
          { id: "other", max_model_len: 1 },
          { id: "m", max_model_len: 4096 },
        ],
      },
    };
    expect(await probeContext(async (p) => vllmRoutes[p], "/v1", "m")).toBe(4096);
    expect(await probeContext(async () => Promise.reject(new Error("404")), "/v1", "m")).toBeUndefined();
  });
});
