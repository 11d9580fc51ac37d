// Each OpenAI request parameter the local backend honours, shown by its effect on real output of the real
// model (stories260K, or the generated model where ../shared is absent), and each it cannot, refused by name.
import { Ajv } from "ajv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import type { Engine } from "../../engine/types.js";
import type { Endpoint } from "../../openai/backend.js";
import { parseRequest } from "../../parse/request.js";
import { openTestEngine } from "../../testkit/model.js";

let engine: Engine;
let backend: LlamaBackend;
beforeAll(async () => {
  engine = await openTestEngine();
  backend = new LlamaBackend(engine);
});
afterAll(async () => {
  await engine?.close();
});

const run = async (endpoint: Endpoint, body: unknown): Promise<any> => {
  const request = parseRequest(endpoint, body);
  backend.check(request);
  return (await backend.execute(request)).body;
};
const complete = (body: object) => run("/v1/completions", { prompt: "Once upon a time", ...body });
const chat = (body: object) => run("/v1/chat/completions", { messages: [{ role: "user", content: "Tell me a story." }], ...body });
const refusal = (endpoint: Endpoint, body: unknown) =>
  run(endpoint, body).then(
    () => {
      throw new Error("expected a refusal");
    },
    (err) => ({ code: err.code, param: err.param, message: err.message, retryable: err.retryable }),
  );

/** Log probabilities in the legacy completions shape, one position at a time. */
type CompletionLogprobs = {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Array<Record<string, number>>;
  text_offset: number[];
};

describe("structured output", () => {
  const labelSchema = {
    type: "object",
    properties: {
      label: { type: "string", enum: ["positive", "negative", "neutral"] },
      // A rating (tests/engine/grammars.int.test.ts checks free numbers).
      score: { type: "integer", enum: [1, 2, 3, 4, 5] },
      // Enumerated strings: a free string from a random model runs past max_tokens, and maxLength is counted by
      // llama.cpp's grammar with a broken UTF-8 sequence (which the random model emits) as one character.
      tags: { type: "array", items: { type: "string", enum: ["animal", "place", "food"] }, maxItems: 2 },
    },
    required: ["label", "score", "tags"],
    additionalProperties: false,
  };

  it("json_schema: every answer parses and validates against the schema, at any temperature", async () => {
    const validate = new Ajv().compile(labelSchema);
    for (const temperature of [0, 1, 2]) {
      for (let seed = 0; seed < 4; seed++) {
        const body = await chat({
          response_format: { type: "json_schema", json_schema: { name: "label", strict: true, schema: labelSchema } },
          temperature,
          seed,
          max_tokens: 200,
        });
        const { content } = body.choices[0].message;
        expect(body.choices[0].finish_reason, content).toBe("stop");
        const parsed = JSON.parse(content);
        expect(validate(parsed), `${content}: ${JSON.stringify(validate.errors)}`).toBe(true);
      }
    }
  });

  it("json_object: the answer is a JSON object; text: it need not be", async () => {
    const body = await chat({ response_format: { type: "json_object" }, temperature: 0, max_tokens: 300 });
    if (body.choices[0].finish_reason === "stop") expect(typeof JSON.parse(body.choices[0].message.content)).toBe("object");
    else expect(body.choices[0].message.content.trimStart().startsWith("{")).toBe(true);
    const text = await chat({ response_format: { type: "text" }, temperature: 0, max_tokens: 8 });
    expect(text.choices[0].message.content.trimStart().startsWith("{")).toBe(false);
  });

  it("refuses, naming the construct, a schema the grammar cannot enforce", async () => {
    const schema = { type: "object", properties: { code: { type: "string", pattern: "^[A-Z]+$" } } };
    const r = await refusal("/v1/chat/completions", {
      messages: [{ role: "user", content: "x" }],
      response_format: { type: "json_schema", json_schema: { name: "s", schema } },
    });
    expect(r).toMatchObject({ code: "unsupported_value", param: "response_format.json_schema.schema", retryable: false });
    expect(r.message).toContain("'pattern' at '#/properties/code'");
  });
});

describe("sampling parameters", () => {
  it("temperature 0, top_p 0 and a seed each make the answer repeatable", async () => {
    const greedy = await complete({ temperature: 0, max_tokens: 16 });
    expect((await complete({ top_p: 0, max_tokens: 16 })).choices[0].text).toBe(greedy.choices[0].text);
    const a = await complete({ temperature: 1.5, seed: 7, max_tokens: 16 });
    const b = await complete({ temperature: 1.5, seed: 7, max_tokens: 16 });
    const c = await complete({ temperature: 1.5, seed: 8, max_tokens: 16 });
    expect(b.choices[0].text).toBe(a.choices[0].text);
    expect([a.choices[0].text, greedy.choices[0].text]).not.toContain(c.choices[0].text === a.choices[0].text ? "" : c.choices[0].text);
  });

  it("frequency_penalty and presence_penalty cut repetition in the answer", async () => {
    const tokens = async (body: object) =>
      (await complete({ temperature: 0, max_tokens: 48, logprobs: 0, ...body })).choices[0].logprobs.tokens;
    const repeats = (t: string[]) => t.length - new Set(t).size;
    const plain = await tokens({});
    const frequency = await tokens({ frequency_penalty: 2 });
    const presence = await tokens({ presence_penalty: 2 });
    expect(repeats(frequency)).toBeLessThan(repeats(plain));
    expect(repeats(presence)).toBeLessThan(repeats(plain));
    // A negative penalty rewards repetition.
    expect(repeats(await tokens({ frequency_penalty: -2 }))).toBeGreaterThanOrEqual(repeats(plain));
  });

  it("logit_bias bans a token at -100 and all but forces one at +100", async () => {
    const greedy = await complete({ temperature: 0, max_tokens: 1, logprobs: 1 });
    const first = greedy.choices[0].logprobs as CompletionLogprobs;
    const firstToken = first.tokens[0];
    // The token id of the greedy first token: bias it away and the first token changes.
    const id = await tokenIdOf(firstToken);
    const banned = await complete({ temperature: 0, max_tokens: 1, logprobs: 1, logit_bias: { [id]: -100 } });
    expect(banned.choices[0].logprobs.tokens[0]).not.toBe(firstToken);
    const forced = await complete({ temperature: 1, seed: 3, max_tokens: 4, logprobs: 0, logit_bias: { [id]: 100 } });
    expect(forced.choices[0].logprobs.tokens).toEqual(Array(4).fill(firstToken));
  });

  it("stop ends the answer before the stop sequence", async () => {
    const greedy = (await complete({ temperature: 0, max_tokens: 24 })).choices[0].text as string;
    const cut = greedy.trim().split(/\s+/)[2];
    const stopped = await complete({ temperature: 0, max_tokens: 24, stop: ["zzz", cut] });
    expect(stopped.choices[0]).toMatchObject({ text: greedy.slice(0, greedy.indexOf(cut)), finish_reason: "stop" });
  });

  it("max_completion_tokens bounds a chat answer", async () => {
    const body = await chat({ max_completion_tokens: 3, temperature: 0 });
    expect(body.usage.completion_tokens).toBeLessThanOrEqual(3);
  });
});

/** The greedy answer's first token in the model's vocabulary, found through logit_bias itself: the id whose ban changes it. */
async function tokenIdOf(token: string): Promise<number> {
  const vocabulary = engine.vocabularySize;
  for (let lo = 0, hi = vocabulary; hi - lo > 1; ) {
    const mid = (lo + hi) >> 1;
    const bias = Object.fromEntries(
      Array.from({ length: mid - lo }, (_, i) => [lo + i, -100]).filter(([t]) => !engine.isEndOfGeneration(t)),
    );
    const r = await complete({ temperature: 0, max_tokens: 1, logprobs: 0, logit_bias: bias });
    if (r.choices[0].logprobs.tokens[0] !== token) hi = mid;
    else lo = mid;
    if (hi - lo === 1) return lo;
  }
  throw new Error("not found");
}

describe("log probabilities", () => {
  it("chat logprobs: one entry per generated token, top_logprobs most likely first, the chosen token among them when greedy", async () => {
    const body = await chat({ temperature: 0, max_tokens: 8, logprobs: true, top_logprobs: 3 });
    const content = body.choices[0].logprobs.content as Array<{ token: string; logprob: number; bytes: number[]; top_logprobs: any[] }>;
    expect(content).toHaveLength(body.usage.completion_tokens - (body.choices[0].finish_reason === "stop" ? 1 : 0));
    expect(content.map((c) => c.token).join("")).toBe(body.choices[0].message.content);
    for (const c of content) {
      expect(c.top_logprobs).toHaveLength(3);
      expect(c.logprob).toBeLessThanOrEqual(0);
      expect(c.top_logprobs[0]).toEqual({ token: c.token, logprob: c.logprob, bytes: c.bytes });
      const lps = c.top_logprobs.map((t) => t.logprob);
      expect([...lps].sort((a, b) => b - a)).toEqual(lps);
      expect(lps.reduce((s, l) => s + Math.exp(l), 0)).toBeLessThanOrEqual(1 + 1e-6);
      expect(c.bytes).toEqual([...Buffer.from(c.token)]);
    }
  });

  it("are the model's, not the temperature's: the same at temperature 0 and 1.5 for the same prefix", async () => {
    const at = async (temperature: number) =>
      (await complete({ temperature, seed: 1, max_tokens: 1, logprobs: 5 })).choices[0].logprobs as CompletionLogprobs;
    const cold = await at(0);
    const hot = await at(1.5);
    // The second request finds the prompt cached and evaluates only its last token, in a batch of another shape, so
    // the last digits may differ (1.5e-6 here). Scaling by the temperature would move these by a large fraction of a
    // nat. A build that sums attention in FP16 (llama.cpp-avx512fp16.patch) differed by 1.5e-3 and fails here.
    for (const [token, lp] of Object.entries(cold.top_logprobs[0])) expect(hot.top_logprobs[0][token]).toBeCloseTo(lp, 3);
  });

  it("completions logprobs: tokens, token_logprobs, top_logprobs and text_offset line up with the text", async () => {
    const body = await complete({ temperature: 0, max_tokens: 6, logprobs: 2 });
    const lp = body.choices[0].logprobs as CompletionLogprobs;
    expect(lp.tokens.join("")).toBe(body.choices[0].text);
    expect(lp.token_logprobs).toHaveLength(lp.tokens.length);
    expect(lp.top_logprobs.every((t) => Object.keys(t).length >= 1 && Object.keys(t).length <= 2)).toBe(true);
    expect(lp.text_offset[0]).toBe(0);
    for (let i = 1; i < lp.tokens.length; i++) expect(lp.text_offset[i]).toBe(lp.text_offset[i - 1] + lp.tokens[i - 1].length);
  });
});

describe("n", () => {
  it("answers n choices from one prompt evaluation, the prompt counted once", async () => {
    const one = await complete({ temperature: 1, seed: 5, max_tokens: 8 });
    const three = await complete({ temperature: 1, seed: 5, max_tokens: 8, n: 3 });
    expect(three.choices.map((c: any) => c.index)).toEqual([0, 1, 2]);
    expect(three.choices[0].text).toBe(one.choices[0].text);
    expect(new Set(three.choices.map((c: any) => c.text)).size).toBeGreaterThan(1);
    expect(three.usage.prompt_tokens).toBe(one.usage.prompt_tokens);
    const chats = await chat({ n: 2, temperature: 1, seed: 2, max_tokens: 4 });
    expect(chats.choices.map((c: any) => c.index)).toEqual([0, 1]);
  });
});

describe("token-id prompts", () => {
  it("run the ids as they are", async () => {
    const body = await run("/v1/completions", { prompt: [1, 2, 3, 4], max_tokens: 2, temperature: 0 });
    expect(body.usage.prompt_tokens).toBe(4);
    expect(await refusal("/v1/completions", { prompt: [1, 999999] })).toMatchObject({ code: "invalid_request", param: "prompt" });
  });
});

describe("refusals", () => {
  const messages = [{ role: "user", content: "hi" }];
  it("names each parameter the local model cannot honour", async () => {
    // Tools need a template with a function-calling format (tests/engine/tools.int.test.ts); stories260K has none.
    const toolless: Array<[Endpoint, object, string, string]> = engine.info.toolCalling
      ? []
      : [["/v1/chat/completions", { messages, tools: [{ type: "function", function: { name: "f" } }] }, "tools", "unsupported_parameter"]];
    const cases: Array<[Endpoint, object, string, string]> = [
      ...toolless,
      ["/v1/chat/completions", { messages, tool_choice: "required" }, "tool_choice", "invalid_request"],
      ["/v1/chat/completions", { messages, modalities: ["text", "audio"] }, "modalities", "unsupported_value"],
      ["/v1/chat/completions", { messages, reasoning_effort: "low" }, "reasoning_effort", "unsupported_parameter"],
      [
        "/v1/chat/completions",
        { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "http://x" } }] }] },
        "messages[0].content[0]",
        "unsupported_value",
      ],
      ["/v1/chat/completions", { messages: [{ role: "user", content: "x", name: "bob" }] }, "messages[0].name", "unsupported_parameter"],
      ["/v1/completions", { prompt: "x", suffix: "y" }, "suffix", "unsupported_parameter"],
      ["/v1/completions", { prompt: "x", best_of: 2 }, "best_of", "unsupported_value"],
      ["/v1/completions", { prompt: "x", logit_bias: { "99999999": 1 } }, "logit_bias", "invalid_request"],
      ["/v1/embeddings", { input: [1, 2, 3] }, "input", "unsupported_value"],
    ];
    for (const [endpoint, body, param, code] of cases) {
      expect(await refusal(endpoint, body), JSON.stringify(body)).toMatchObject({ param, code, retryable: false });
    }
  });
});
