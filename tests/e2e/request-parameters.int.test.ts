// A labelling batch as users send it, through the real service and the official `openai` client: 200 lines
// with a JSON schema, lines using logprobs, n and penalties, and bad lines that fail alone with the field
// named. Every output line is read with the SDK's own types.
import { Ajv } from "ajv";
import type OpenAI from "openai";
import { toFile } from "openai";
import type { BatchError } from "openai/resources/batches";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openaiClient, startTestService, type TestService, waitForClientBatch } from "../helpers/service.js";

let svc: TestService;
let client: OpenAI;
beforeAll(async () => {
  svc = await startTestService();
  client = openaiClient(svc);
});
afterAll(async () => svc?.close());

const schema = {
  type: "object",
  properties: {
    sentiment: { type: "string", enum: ["positive", "negative", "neutral"] },
    topic: { type: "string", enum: ["animals", "weather", "food", "other"] },
  },
  required: ["sentiment", "topic"],
  additionalProperties: false,
};
const LABELLED = 200;
const line = (id: string, body: object) =>
  JSON.stringify({ custom_id: id, method: "POST", url: "/v1/chat/completions", body: { model: "any", max_tokens: 150, ...body } });
const label = (i: number) =>
  line(`label-${i}`, {
    messages: [
      { role: "system", content: "Label the sentence as JSON." },
      { role: "user", content: `Sentence ${i}: the little dog played in the sun.` },
    ],
    temperature: i % 3 === 0 ? 0 : 0.8,
    seed: i,
    response_format: { type: "json_schema", json_schema: { name: "label", strict: true, schema } },
  });
const user = [{ role: "user", content: "Once upon a time" }];
const extras = [
  line("logprobs", { messages: user, logprobs: true, top_logprobs: 2, temperature: 0 }),
  line("n", { messages: user, n: 3, temperature: 1, seed: 4 }),
  line("penalties", { messages: user, frequency_penalty: 1.5, presence_penalty: 0.5, logit_bias: { "5": -100 } }),
];
const bad: Array<[string, object, string, string]> = [
  ["unknown", { messages: user, repetition_penalty: 1.2 }, "repetition_penalty", "unknown_parameter"],
  [
    "tool-choice",
    { messages: user, tools: [{ type: "function", function: { name: "f" } }], tool_choice: { type: "function", function: { name: "g" } } },
    "tool_choice.function.name",
    "invalid_request",
  ],
  ["hot", { messages: user, temperature: 9 }, "temperature", "invalid_request"],
  [
    "image",
    { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://x/y.png" } }] }] },
    "messages[0].content[0]",
    "unsupported_value",
  ],
  [
    "pattern",
    { messages: user, response_format: { type: "json_schema", json_schema: { name: "p", schema: { type: "string", pattern: "x" } } } },
    "response_format.json_schema.schema",
    "unsupported_value",
  ],
];

describe("request parameters through the service", () => {
  it("honours each line's parameters, fails only the bad lines, and every line parses with the SDK's types", async () => {
    const lines = [...Array.from({ length: LABELLED }, (_, i) => label(i)), ...extras, ...bad.map(([id, body]) => line(id, body))];
    const file = await client.files.create({ file: await toFile(Buffer.from(`${lines.join("\n")}\n`), "labels.jsonl"), purpose: "batch" });
    const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const batch = await waitForClientBatch(client, created.id, 120000);
    expect(batch.status, JSON.stringify(batch.errors as { data?: BatchError[] } | null)).toBe("completed");
    expect(batch.request_counts).toEqual({ completed: LABELLED + extras.length, failed: bad.length, total: lines.length });
    expect(batch.model).toBe(svc.service.backend.info.model);

    const read = async (id: string | null | undefined) =>
      (await (await client.files.content(id!)).text())
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { custom_id: string; response: { status_code: number; body: any } });
    const out = new Map((await read(batch.output_file_id)).map((r) => [r.custom_id, r.response]));
    const validate = new Ajv().compile(schema);
    let valid = 0;
    for (let i = 0; i < LABELLED; i++) {
      const completion: OpenAI.ChatCompletion = out.get(`label-${i}`)!.body;
      expect(completion.model).toBe(svc.service.backend.info.model);
      const content = completion.choices[0].message.content ?? "";
      if (completion.choices[0].finish_reason === "stop" && validate(JSON.parse(content))) valid++;
    }
    // Every labelling answer parses and validates: grammar-constrained, not merely prompted.
    expect(valid).toBe(LABELLED);

    const withLogprobs: OpenAI.ChatCompletion = out.get("logprobs")!.body;
    const tokens = withLogprobs.choices[0].logprobs?.content ?? [];
    expect(tokens.length).toBeGreaterThan(0);
    expect(tokens.every((t) => t.top_logprobs.length === 2 && t.logprob <= 0 && Array.isArray(t.bytes))).toBe(true);
    const three: OpenAI.ChatCompletion = out.get("n")!.body;
    expect(three.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(out.get("penalties")!.status_code).toBe(200);

    const errors = new Map((await read(batch.error_file_id)).map((r) => [r.custom_id, r.response]));
    for (const [id, , param, code] of bad) {
      const response = errors.get(id)!;
      expect(response.status_code, id).toBe(400);
      const error: OpenAI.ErrorObject = response.body.error;
      expect(error, id).toMatchObject({ type: "invalid_request_error", param, code });
      expect(error.message.length).toBeGreaterThan(10);
    }
    // The batch may take the two minutes its wait allows (its lines on a loaded machine): the default 60 s cut it short.
  }, 180_000);
});
