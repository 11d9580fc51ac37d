// The determinism rule (which requests may share one answer) and the canonical form of a body: the same request
// written another way matches, a request that asks anything else does not.
import { describe, expect, it } from "vitest";
import { canonicalBody, isDeterministic } from "../../cache/rule.js";
import type { Endpoint } from "../../openai/backend.js";
import { parseRequest } from "../../parse/request.js";

const req = (endpoint: Endpoint, body: Record<string, unknown>) => parseRequest(endpoint, body);
const chat = (extra: Record<string, unknown>) =>
  req("/v1/chat/completions", { model: "m", messages: [{ role: "user", content: "hi" }], ...extra });
const completion = (extra: Record<string, unknown>) => req("/v1/completions", { model: "m", prompt: "hi", ...extra });
const sameKey = (a: ReturnType<typeof req>, b: ReturnType<typeof req>) => canonicalBody(a) === canonicalBody(b);

describe("the determinism rule", () => {
  it("takes greedy and seeded generation, embeddings, rerank and score; never a sampled request without a seed", () => {
    expect(isDeterministic(chat({ temperature: 0 }))).toBe(true);
    expect(isDeterministic(chat({ top_p: 0 }))).toBe(true);
    expect(isDeterministic(chat({ temperature: 0.7, seed: 42 }))).toBe(true);
    expect(isDeterministic(completion({ temperature: 0 }))).toBe(true);
    expect(isDeterministic(req("/v1/embeddings", { model: "m", input: "x" }))).toBe(true);
    expect(isDeterministic(req("/v1/rerank", { model: "m", query: "q", documents: ["a", "b"] }))).toBe(true);
    expect(isDeterministic(req("/v1/score", { model: "m", text_1: "q", text_2: ["a"] }))).toBe(true);
    expect(isDeterministic(req("/v1/responses", { model: "m", input: "hi", temperature: 0 }))).toBe(true);
    expect(
      isDeterministic(req("/v1/messages", { model: "m", max_tokens: 8, messages: [{ role: "user", content: "hi" }], temperature: 0 })),
    ).toBe(true);

    expect(isDeterministic(chat({}))).toBe(false);
    expect(isDeterministic(chat({ temperature: 0.7 }))).toBe(false);
    expect(isDeterministic(chat({ temperature: 1e-9 }))).toBe(false);
    expect(isDeterministic(completion({ top_p: 0.5 }))).toBe(false);
    expect(isDeterministic(req("/v1/responses", { model: "m", input: "hi" }))).toBe(false);
    expect(isDeterministic(req("/v1/messages", { model: "m", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }))).toBe(false);
  });
});

describe("the canonical form of a body", () => {
  it("matches the same request written with other key order, number forms, whitespace and defaults", () => {
    const a = req("/v1/completions", JSON.parse('{"model":"m","prompt":"hi","temperature":0,"max_tokens":8}'));
    const b = req("/v1/completions", JSON.parse('{ "max_tokens" : 8 , "temperature" : 0.0 , "prompt" : "hi", "model":"m" }'));
    expect(sameKey(a, b)).toBe(true);
    expect(
      sameKey(chat({ temperature: 0, n: 1, top_p: 1, stream: false, user: "u1" }), chat({ temperature: 0, user: "u2", seed: null })),
    ).toBe(true);
    expect(
      sameKey(
        chat({ temperature: 0 }),
        req("/v1/chat/completions", { temperature: -0, model: "other", messages: [{ content: "hi", role: "user" }] }),
      ),
    ).toBe(true);
    expect(
      sameKey(
        req("/v1/embeddings", { model: "m", input: "x", encoding_format: "float" }),
        req("/v1/embeddings", { model: "m", input: "x" }),
      ),
    ).toBe(true);
  });

  it("does not match near misses: another prompt, bound, stop, seed, message order, endpoint or a non-default value", () => {
    const base = chat({ temperature: 0, max_tokens: 8 });
    for (const other of [
      chat({ temperature: 0, max_tokens: 9 }),
      chat({ temperature: 0, max_tokens: 8, stop: ["\n"] }),
      chat({ temperature: 0, max_tokens: 8, seed: 1 }),
      chat({ temperature: 0, max_tokens: 8, n: 2 }),
      chat({ temperature: 0, max_tokens: 8, logprobs: true }),
      chat({ temperature: 0, max_tokens: 8, presence_penalty: 0.1 }),
      req("/v1/chat/completions", { model: "m", messages: [{ role: "user", content: "hi " }], temperature: 0, max_tokens: 8 }),
      req("/v1/chat/completions", {
        model: "m",
        messages: [
          { role: "system", content: "s" },
          { role: "user", content: "hi" },
        ],
        temperature: 0,
        max_tokens: 8,
      }),
      req("/v1/chat/completions", {
        model: "m",
        messages: [
          { role: "user", content: "hi" },
          { role: "system", content: "s" },
        ],
        temperature: 0,
        max_tokens: 8,
      }),
      completion({ temperature: 0, max_tokens: 8 }),
    ])
      expect(sameKey(base, other)).toBe(false);
    expect(sameKey(chat({ temperature: 0.5, seed: 1 }), chat({ temperature: 0.5, seed: 2 }))).toBe(false);
    expect(
      sameKey(
        req("/v1/rerank", { model: "m", query: "q", documents: ["a", "b"] }),
        req("/v1/rerank", { model: "m", query: "q", documents: ["b", "a"] }),
      ),
    ).toBe(false);
  });

  it("keeps what a Responses answer echoes (its metadata, its user)", () => {
    const r = (extra: Record<string, unknown>) => req("/v1/responses", { model: "m", input: "hi", temperature: 0, ...extra });
    expect(sameKey(r({ metadata: { a: "1" } }), r({ metadata: { a: "2" } }))).toBe(false);
    expect(sameKey(r({ user: "a" }), r({ user: "b" }))).toBe(false);
  });
});
