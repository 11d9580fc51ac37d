// The request bodies as OpenAI defines them: every documented field checked for shape and range, anything
// else refused by name (unknown_parameter), each failure a RequestError whose param names the field.
import { describe, expect, it } from "vitest";
import type { Endpoint } from "../../openai/backend.js";
import { RequestError } from "../../openai/errors.js";
import { parseRequest } from "../../parse/request.js";

const refusal = (endpoint: Endpoint, body: unknown) => {
  try {
    parseRequest(endpoint, body);
  } catch (err) {
    expect(err).toBeInstanceOf(RequestError);
    const e = err as RequestError;
    expect(e.retryable).toBe(false);
    return { code: e.code, param: e.param, message: e.message };
  }
  throw new Error("expected a refusal");
};
const chat = "/v1/chat/completions" as const;
const base = { model: "m", messages: [{ role: "user", content: "hi" }] };

describe("chat bodies", () => {
  it("refuses a body that is not a JSON object by what it is, not by a field it lacks", () => {
    expect(refusal(chat, [1, 2, 3])).toEqual({
      code: "invalid_request",
      param: null,
      message: "The request body must be a JSON object, not an array.",
    });
    expect(refusal(chat, "hi").message).toBe("The request body must be a JSON object, not a string.");
    expect(refusal("/v1/embeddings", null).message).toBe("The request body must be a JSON object, not null.");
  });

  it("accepts every documented field that changes nothing as metadata", () => {
    const body = {
      ...base,
      user: "u",
      store: false,
      metadata: { k: "v" },
      service_tier: "auto",
      safety_identifier: "s",
      prompt_cache_key: "p",
      prompt_cache_retention: "24h",
      stream: false,
      stream_options: null,
      parallel_tool_calls: true,
      modalities: ["text"],
      response_format: { type: "text" },
    };
    expect(parseRequest(chat, body)).toMatchObject({ endpoint: chat, body: { user: "u", metadata: { k: "v" } } });
  });

  it("refuses store: true, naming it: OpenAI keeps such a completion for retrieval, which this service does not", () => {
    expect(refusal(chat, { ...base, store: true })).toMatchObject({ code: "invalid_request", param: "store" });
    expect(refusal(chat, { ...base, store: true }).message).toMatch(/retrieval/);
  });

  it("takes back an assistant reply as the service answered it: refusal, annotations, null tool_calls", () => {
    const reply = { role: "assistant", content: "hi", refusal: null, annotations: [], tool_calls: null, audio: null, function_call: null };
    expect(parseRequest(chat, { ...base, messages: [...base.messages, reply] }).body).toMatchObject({ messages: [{}, reply] });
    const cited = { type: "url_citation", url_citation: { start_index: 0, end_index: 2, title: "t", url: "https://x" } };
    expect(() => parseRequest(chat, { ...base, messages: [{ ...reply, annotations: [cited] }] })).not.toThrow();
    // A helper's own field, which no reply holds, is no parameter.
    expect(refusal(chat, { ...base, messages: [{ ...reply, parsed: null }] })).toMatchObject({
      code: "unknown_parameter",
      param: "messages[0].parsed",
    });
  });

  it("refuses a field OpenAI does not define, by name", () => {
    expect(refusal(chat, { ...base, repetition_penalty: 1.1 })).toMatchObject({ code: "unknown_parameter", param: "repetition_penalty" });
    expect(refusal(chat, { ...base, messages: [{ role: "user", content: "x", extra: 1 }] })).toMatchObject({
      code: "unknown_parameter",
      param: "messages[0].extra",
    });
  });

  it("checks OpenAI's ranges and shapes, naming the field", () => {
    for (const [field, value] of [
      ["temperature", 2.5],
      ["top_p", 1.5],
      ["frequency_penalty", -2.5],
      ["presence_penalty", 3],
      ["n", 0],
      ["n", 129],
      ["top_logprobs", 21],
      ["seed", 1.5],
    ] as const) {
      expect(refusal(chat, { ...base, logprobs: true, [field]: value }).param).toBe(field);
    }
    expect(refusal(chat, { ...base, stop: ["a", "b", "c", "d", "e"] }).message).toMatch(/at most 4/);
    // An empty stop sequence can stop nothing: refused, not dropped.
    expect(refusal(chat, { ...base, stop: ["a", ""] })).toMatchObject({ param: "stop[1]", message: expect.stringMatching(/empty/) });
    expect(refusal(chat, { ...base, stop: "" })).toMatchObject({ param: "stop", message: expect.stringMatching(/empty/) });
    expect(refusal(chat, { ...base, stream: true }).message).toMatch(/stream/);
    expect(refusal(chat, { ...base, logit_bias: { "50256": 101 } }).param).toBe("logit_bias.50256");
    expect(refusal(chat, { ...base, logit_bias: { abc: 1 } }).param).toBe("logit_bias.abc");
    expect(refusal(chat, { ...base, top_logprobs: 2 })).toMatchObject({
      param: "top_logprobs",
      message: expect.stringMatching(/logprobs/),
    });
    expect(refusal(chat, { ...base, messages: [] }).message).toMatch(/at least one/);
    expect(refusal(chat, { ...base, messages: [{ role: "robot", content: "x" }] }).param).toBe("messages[0].role");
    expect(refusal(chat, { ...base, response_format: { type: "xml" } }).param).toBe("response_format.type");
    expect(refusal(chat, { ...base, response_format: { type: "json_schema", json_schema: { name: "a b" } } }).param).toBe(
      "response_format.json_schema.name",
    );
    expect(refusal(chat, { model: "m" })).toMatchObject({ code: "missing_required_parameter", param: "messages" });
  });
});

describe("completion and embedding bodies", () => {
  it("take text or token ids; refuse what is malformed", () => {
    const completions = "/v1/completions" as const;
    expect(parseRequest(completions, { prompt: [1, 2, 3] }).body).toMatchObject({ prompt: [1, 2, 3] });
    expect(parseRequest(completions, { prompt: "x", max_tokens: 0, echo: true }).body).toMatchObject({ max_tokens: 0 });
    expect(refusal(completions, { prompt: [] }).param).toBe("prompt");
    expect(refusal(completions, {})).toMatchObject({ code: "missing_required_parameter", param: "prompt" });
    expect(refusal(completions, { prompt: "x", logprobs: 6 }).param).toBe("logprobs");
    expect(refusal(completions, { prompt: "x", n: 3, best_of: 2 }).param).toBe("best_of");
    const embeddings = "/v1/embeddings" as const;
    expect(refusal(embeddings, { input: "" }).param).toBe("input");
    expect(refusal(embeddings, { input: ["a", ""] }).param).toBe("input[1]");
    expect(refusal(embeddings, { input: "x", encoding_format: "int8" }).param).toBe("encoding_format");
    expect(refusal(embeddings, { input: "x", temperature: 0 })).toMatchObject({ code: "unknown_parameter", param: "temperature" });
  });
});
