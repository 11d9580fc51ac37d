// A synchronous request's body as its route takes it: `service_tier` picks the lane on every endpoint (a field of
// the route where the endpoint's own body has none), and the answer names the tier only where its type has a field
// for it, as OpenAI's and Anthropic's objects do.
import { describe, expect, it } from "vitest";
import { InvalidRequestError } from "../../domain/errors.js";
import type { Endpoint } from "../../openai/backend.js";
import { parse, tierOf, withTier } from "../../sync/request.js";

describe("withTier", () => {
  it("names the tier on chat completions and responses, and in an Anthropic message's usage", () => {
    expect(withTier("/v1/chat/completions", { object: "chat.completion" }, "flex")).toMatchObject({ service_tier: "flex" });
    expect(withTier("/v1/responses", { object: "response" }, "default")).toMatchObject({ service_tier: "default" });
    expect(withTier("/v1/messages", { type: "message", usage: { input_tokens: 3 } }, "default")).toEqual({
      type: "message",
      usage: { input_tokens: 3, service_tier: "standard" },
    });
  });

  it("leaves completions, embeddings and the ranking bodies as their types define them: no service_tier", () => {
    const bodies: Array<[Endpoint, Record<string, unknown>]> = [
      ["/v1/completions", { object: "text_completion", choices: [] }],
      ["/v1/embeddings", { object: "list", data: [] }],
      ["/v1/rerank", { results: [] }],
      ["/v1/score", { object: "list", data: [] }],
    ];
    for (const [endpoint, body] of bodies) expect(withTier(endpoint, body, "flex")).toEqual(body);
  });
});

describe("parse", () => {
  it("takes service_tier on every endpoint, as the lane to run in, and leaves it out of a body that has no such field", () => {
    const bodies: Array<[Endpoint, Record<string, unknown>]> = [
      ["/v1/embeddings", { model: "m", input: "x" }],
      ["/v1/rerank", { query: "q", documents: ["d"] }],
      ["/v1/score", { text_1: "a", text_2: "b" }],
    ];
    for (const [endpoint, body] of bodies) {
      const flex = { ...body, service_tier: "flex" };
      expect(tierOf(flex)).toBe("flex");
      expect(parse(endpoint, flex, false).body).toEqual(body);
      const bad = (() => {
        try {
          return parse(endpoint, { ...body, service_tier: "cheap" }, false);
        } catch (err) {
          return err;
        }
      })();
      expect(bad).toBeInstanceOf(InvalidRequestError);
      expect(bad).toMatchObject({ param: "service_tier" });
    }
    expect(parse("/v1/completions", { model: "m", prompt: "x", service_tier: "flex" }, false).body).toMatchObject({
      service_tier: "flex",
    });
  });

  it("refuses a request of OpenAI's endpoints that names no model, naming it, as OpenAI does; others' model stays optional", () => {
    const bodies: Array<[Endpoint, Record<string, unknown>]> = [
      ["/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 2 }],
      ["/v1/completions", { prompt: "x", max_tokens: 2 }],
      ["/v1/embeddings", { input: "x" }],
      ["/v1/responses", { input: "x", model: null }],
    ];
    for (const [endpoint, body] of bodies) {
      for (const streamed of endpoint === "/v1/embeddings" ? [false] : [false, true]) {
        const asked = streamed ? { ...body, stream: true } : body;
        expect(() => parse(endpoint, asked, streamed), endpoint).toThrow(
          expect.objectContaining({ code: "missing_required_parameter", param: "model", message: "Missing required parameter: 'model'." }),
        );
      }
    }
    expect(parse("/v1/rerank", { query: "q", documents: ["d"] }, false).body).not.toHaveProperty("model");
  });

  it("refuses a body that is not a JSON object as such on every endpoint, as a batch line's", () => {
    for (const endpoint of ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages", "/v1/embeddings"] as Endpoint[])
      for (const [body, kind] of [
        [[1, 2, 3], "an array"],
        ["hi", "a string"],
        [7, "a number"],
      ] as const)
        expect(() => parse(endpoint, body, false), `${endpoint} ${kind}`).toThrow(`The request body must be a JSON object, not ${kind}.`);
  });

  it("takes a streamed response's stream_options (include_obfuscation, as openai-node types them), out of what the backend sees", () => {
    const body = { model: "m", input: "x", stream: true, stream_options: { include_obfuscation: false } };
    expect(parse("/v1/responses", body, true).body).toEqual({ model: "m", input: "x" });
    expect(() => parse("/v1/responses", { ...body, stream_options: { include_usage: true } }, true)).toThrow(
      expect.objectContaining({ code: "unknown_parameter", param: "stream_options.include_usage" }),
    );
    expect(() => parse("/v1/responses", { ...body, stream: false }, false)).toThrow(expect.objectContaining({ param: "stream_options" }));
  });
});
