// JSON grammars with bounded numbers (engine/generate/grammars.ts): node-llama-cpp's own rules let a model write numbers
// no double holds (1e999 reads as Infinity, written back as null) and "integers" with negative exponents. Checked
// on the library's real grammar text and on the generated model's real answers, which write such numbers often.
import { getLlama } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import { boundedNumbers } from "../../engine/generate/grammars.js";
import type { Engine } from "../../engine/types.js";
import { parseRequest } from "../../openai/parse.js";
import { openGeneratedEngine } from "../../testkit/model.js";

const numbers = {
  type: "object",
  properties: { count: { type: "integer" }, ratio: { type: "number" }, series: { type: "array", items: { type: "number" }, maxItems: 3 } },
  required: ["count", "ratio", "series"],
  additionalProperties: false,
};

/** A number rule's exponent as node-llama-cpp writes it: up to 16 digits. */
const UNBOUNDED = /\[eE\] \[-\+\]\? (\("0" \| \[1-9\] \[0-9\]\{0,15\}\)|\[0-9\] \[1-9\]\{0,15\})/;

describe("the grammar text", () => {
  it("every number rule of node-llama-cpp's schema and json grammars is rewritten, nothing else changes", async () => {
    const llama = await getLlama({ build: "never" });
    const texts = [
      (await llama.createGrammarForJsonSchema(numbers as { type: "object" })).grammar,
      (await llama.getGrammarFor("json")).grammar,
    ];
    for (const text of texts) {
      // If an upgrade changes the library's rules, this fails instead of letting unbounded numbers through.
      expect(text).toMatch(UNBOUNDED);
      const bounded = boundedNumbers(text);
      expect(bounded).not.toMatch(UNBOUNDED);
      const changed = text.split("\n").filter((line, i) => line !== bounded.split("\n")[i]);
      expect(changed.length).toBeGreaterThan(0);
      for (const line of changed) expect(line).toMatch(/^(integer-number-rule|fractional-number-rule|number) ::=/);
    }
    const integer = boundedNumbers((await llama.createGrammarForJsonSchema(numbers as { type: "object" })).grammar)
      .split("\n")
      .find((l) => l.startsWith("integer-number-rule"));
    expect(integer).toBe('integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14})');
  });
});

describe("answers of the generated model", () => {
  let engine: Engine;
  let backend: LlamaBackend;
  beforeAll(async () => {
    engine = await openGeneratedEngine(8);
    backend = new LlamaBackend(engine);
  });
  afterAll(async () => {
    await engine?.close();
  });
  const chat = async (body: object): Promise<any> => {
    const request = parseRequest("/v1/chat/completions", { messages: [{ role: "user", content: "Count." }], ...body });
    backend.check(request);
    return (await backend.execute(request)).body;
  };
  /** Every number finite, the integer an integer written without exponent or fraction. */
  const expectBounded = (text: string) => {
    const value = JSON.parse(text);
    expect(Number.isSafeInteger(value.count), text).toBe(true);
    expect(text).toMatch(/"count"\s*:\s*-?\d+\s*[,}\n]/);
    for (const n of [value.ratio, ...value.series]) expect(Number.isFinite(n), text).toBe(true);
  };

  it("json_schema answers and tool-call arguments hold finite numbers and true integers, at temperature 2", async () => {
    const seeds = Array.from({ length: 12 }, (_, seed) => seed);
    const format = { type: "json_schema", json_schema: { name: "n", strict: true, schema: numbers } };
    const tools = [{ type: "function", function: { name: "record", parameters: numbers } }];
    const answers = await Promise.all(
      seeds.flatMap((seed) => [
        chat({ response_format: format, temperature: 2, seed, max_tokens: 300 }),
        chat({ tools, tool_choice: "required", temperature: 2, seed, max_tokens: 300 }),
      ]),
    );
    let checked = 0;
    for (const body of answers) {
      const [choice] = body.choices;
      if (choice.finish_reason === "stop") expectBounded(choice.message.content);
      else if (choice.finish_reason === "tool_calls") expectBounded(choice.message.tool_calls[0].function.arguments);
      else continue;
      checked++;
    }
    // Most finish within the budget; the cut ones have nothing to check.
    expect(checked).toBeGreaterThan(answers.length / 2);
  });

  it("a call's cached tokens are the prompt's own, never the call syntax written after it", async () => {
    const tools = [{ type: "function", function: { name: "record", parameters: numbers } }];
    for (let i = 0; i < 2; i++) {
      const { usage } = await chat({ tools, tool_choice: "required", temperature: 0, max_tokens: 60 });
      expect(usage.prompt_tokens_details.cached_tokens).toBeLessThanOrEqual(usage.prompt_tokens);
      // The second run finds the prompt cached (all but the token evaluated again for the first new one's logits).
      if (i === 1) expect(usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(usage.prompt_tokens - 1);
    }
  });
});
