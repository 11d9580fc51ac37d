// The local backend on the real engine: OpenAI response shapes of the three endpoints, each parameter's
// effect on the answer, and the per-request refusals of what it cannot honour.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { float32Base64, LlamaBackend } from "../../engine/adapter/openai-backend.js";
import type { Engine } from "../../engine/types.js";
import type { BackendResult, Endpoint } from "../../openai/backend.js";
import { RequestError } from "../../openai/errors.js";
import { openTestEngine } from "../../testkit/model.js";
import { runLine } from "../helpers/test-engine.js";

let engine: Engine;
let backend: LlamaBackend;
beforeAll(async () => {
  engine = await openTestEngine();
  backend = new LlamaBackend(engine);
});

/** One line's body as the pipeline runs it: parsed, checked, executed. */
const run = (endpoint: Endpoint, body: unknown): Promise<BackendResult> => runLine(backend, endpoint, body);
afterAll(async () => {
  await engine?.close();
});

const decodeFloat32 = (b64: string) => {
  const buf = Buffer.from(b64, "base64");
  return Array.from({ length: buf.length / 4 }, (_, i) => buf.readFloatLE(i * 4));
};

describe("LlamaBackend", () => {
  it("/v1/completions returns a text_completion with usage", async () => {
    const { body, usage } = await run("/v1/completions", {
      model: "another-model",
      prompt: "Once upon a time",
      max_tokens: 6,
      temperature: 0,
    });
    expect(body).toMatchObject({
      id: expect.stringMatching(/^cmpl-[0-9a-f]+$/),
      object: "text_completion",
      created: expect.any(Number),
      // The model that served it, whatever the line named.
      model: engine.info.modelId,
      choices: [{ text: expect.any(String), index: 0, logprobs: null, finish_reason: expect.stringMatching(/^(stop|length)$/) }],
    });
    const u = body.usage as { prompt_tokens: number; completion_tokens: number; total_tokens: number };
    expect(u.prompt_tokens).toBeGreaterThan(0);
    expect(u.completion_tokens).toBeGreaterThan(0);
    expect(u.completion_tokens).toBeLessThanOrEqual(6);
    expect(u.total_tokens).toBe(u.prompt_tokens + u.completion_tokens);
    expect(usage).toMatchObject({ promptTokens: u.prompt_tokens, completionTokens: u.completion_tokens });
  });

  it("/v1/completions with a prompt array answers one choice per prompt; echo prepends the prompt", async () => {
    const { body } = await run("/v1/completions", {
      prompt: ["Once upon a time", "The cat"],
      max_tokens: 3,
      temperature: 0,
      echo: true,
    });
    const choices = body.choices as Array<{ text: string; index: number }>;
    expect(choices.map((c) => c.index)).toEqual([0, 1]);
    expect(choices[0].text.startsWith("Once upon a time")).toBe(true);
    expect(choices[1].text.startsWith("The cat")).toBe(true);
    expect(body.model).toBe(engine.info.modelId);
  });

  it("/v1/chat/completions returns a chat.completion", async () => {
    const { body, usage } = await run("/v1/chat/completions", {
      messages: [
        { role: "system", content: "You tell stories." },
        { role: "user", content: [{ type: "text", text: "Tell me about a dog." }] },
      ],
      max_completion_tokens: 5,
      seed: 1,
    });
    expect(body).toMatchObject({
      id: expect.stringMatching(/^chatcmpl-/),
      object: "chat.completion",
      model: engine.info.modelId,
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: expect.any(String), refusal: null },
          logprobs: null,
          finish_reason: expect.any(String),
        },
      ],
      usage: {
        prompt_tokens: usage.promptTokens,
        completion_tokens: usage.completionTokens,
        prompt_tokens_details: { cached_tokens: usage.cachedTokens },
      },
    });
    expect(usage.completionTokens).toBeLessThanOrEqual(5);
  });

  it("/v1/embeddings returns a list of vectors, as floats or as little-endian float32 base64", async () => {
    const floats = await run("/v1/embeddings", { input: ["a happy dog", "the sun"] });
    expect(floats.body).toMatchObject({
      object: "list",
      model: engine.info.modelId,
      usage: { prompt_tokens: floats.usage.promptTokens, total_tokens: floats.usage.promptTokens },
    });
    const data = floats.body.data as Array<{ object: string; index: number; embedding: number[] }>;
    expect(data.map((d) => [d.object, d.index, d.embedding.length])).toEqual([
      ["embedding", 0, engine.info.embeddingDimensions],
      ["embedding", 1, engine.info.embeddingDimensions],
    ]);
    const b64 = await run("/v1/embeddings", { input: "a happy dog", encoding_format: "base64" });
    const [first] = b64.body.data as Array<{ embedding: string }>;
    expect(typeof first.embedding).toBe("string");
    expect(decodeFloat32(first.embedding)).toEqual(data[0].embedding.map((v) => Math.fround(v)));
  });

  it("refuses a bad body or a foreign embedding size as a non-retryable request error", async () => {
    await expect(run("/v1/completions", { prompt: 42 })).rejects.toMatchObject({ code: "invalid_request", param: "prompt" });
    const err = await run("/v1/embeddings", { input: "x", dimensions: engine.info.embeddingDimensions + 1 }).catch((e) => e);
    expect(err).toBeInstanceOf(RequestError);
    expect(err).toMatchObject({ retryable: false, param: "dimensions" });
  });

  it("a prompt longer than the context fails as a non-retryable engine error", async () => {
    const err = await run("/v1/completions", {
      prompt: "Once upon a time there was a dog. ".repeat(200),
      max_tokens: 4,
    }).catch((e) => e);
    expect(err).toBeInstanceOf(RequestError);
    expect(err.retryable).toBe(false);
  });
});

describe("float32Base64", () => {
  it("encodes like OpenAI: float32 little-endian", () => {
    expect(float32Base64([1, -2.5])).toBe(Buffer.from([0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0]).toString("base64"));
  });
});
