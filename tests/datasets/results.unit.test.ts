// Result lines back to rows: each endpoint's answer as columns, a schema's fields typed, and the rows written in
// input order whatever order the lines finished in, a failed row kept with its error.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { checkFlags, type Job, planStages } from "../../datasets/job.js";
import { customId } from "../../datasets/requests.js";
import { columnsOfResponse, resultColumns, writeResults } from "../../datasets/results.js";
import type { TableInput } from "../../datasets/tables.js";
import { jsonl, scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("results");
const HASH = "0123456789ab";
const job = (fields: Record<string, unknown>): Job =>
  planStages(undefined, "/d", checkFlags({ input: "i.csv", output: "o.csv", ...fields }), "/d")[0];
const schema = {
  type: "json_schema",
  json_schema: {
    name: "label",
    schema: {
      type: "object",
      properties: { label: { enum: ["pos", "neg"] }, confidence: { type: "number" }, tags: { type: "array", items: { type: "string" } } },
    },
  },
};
const chatBody = (content: string, finish = "stop") => ({
  choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: finish }],
  usage: { prompt_tokens: 10, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 4 } },
});
const ok = (n: number, body: object) => ({ custom_id: customId(n, HASH), response: { status_code: 200, body }, error: null });
const noRows: TableInput = { files: [], columns: [], rows: async function* () {}, count: async () => 0 };

describe("result columns", () => {
  it("are the text, or a JSON schema's fields typed, then finish_reason, tokens and the error", () => {
    expect(resultColumns(job({ prompt: "x" })).map((c) => c.name)).toEqual([
      "text",
      "finish_reason",
      "prompt_tokens",
      "completion_tokens",
      "cached_tokens",
      "error_code",
      "error_message",
    ]);
    expect(resultColumns(job({ prompt: "x", response_format: schema })).slice(0, 3)).toEqual([
      { name: "label", type: "string" },
      { name: "confidence", type: "number" },
      { name: "tags", type: "string[]" },
    ]);
    expect(resultColumns(job({ prompt: "x", endpoint: "/v1/embeddings" })).map((c) => `${c.name}:${c.type}`)).toEqual([
      "embedding:vector",
      "prompt_tokens:integer",
      "error_code:string",
      "error_message:string",
    ]);
    expect(resultColumns(job({ prompt: "x", params: { tools: [] } })).map((c) => c.name)).toContain("tool_calls");
  });

  it("come from each endpoint's answer", () => {
    const usage = { finish_reason: "stop", prompt_tokens: 10, completion_tokens: 3, cached_tokens: 4 };
    expect(columnsOfResponse(job({ prompt: "x" }), chatBody("hi"))).toEqual({ text: "hi", ...usage });
    expect(
      columnsOfResponse(job({ prompt: "x", endpoint: "/v1/completions" }), {
        choices: [{ text: "t", finish_reason: "length" }],
        usage: { prompt_tokens: 1, completion_tokens: 2 },
      }),
    ).toEqual({ text: "t", finish_reason: "length", prompt_tokens: 1, completion_tokens: 2, cached_tokens: 0 });
    expect(
      columnsOfResponse(job({ prompt: "x", endpoint: "/v1/responses" }), {
        status: "incomplete",
        incomplete_details: { reason: "max_output_tokens" },
        output: [{ type: "message", content: [{ type: "output_text", text: "r" }] }],
        usage: { input_tokens: 5, output_tokens: 6, input_tokens_details: { cached_tokens: 1 } },
      }),
    ).toEqual({ text: "r", finish_reason: "max_output_tokens", prompt_tokens: 5, completion_tokens: 6, cached_tokens: 1 });
    expect(
      columnsOfResponse(job({ prompt: "x", endpoint: "/v1/messages", model: "m" }), {
        content: [{ type: "text", text: "a" }],
        stop_reason: "end_turn",
        usage: { input_tokens: 2, output_tokens: 1, cache_read_input_tokens: 0 },
      }),
    ).toEqual({ text: "a", finish_reason: "end_turn", prompt_tokens: 2, completion_tokens: 1, cached_tokens: 0 });
    expect(
      columnsOfResponse(job({ prompt: "x", endpoint: "/v1/embeddings" }), { data: [{ embedding: [0.5] }], usage: { prompt_tokens: 3 } }),
    ).toEqual({ embedding: [0.5], prompt_tokens: 3 });
    const rerank = job({ endpoint: "/v1/rerank", body: { query: "{{q}}", documents: ["{{a}}", "{{b}}"] } });
    expect(resultColumns(rerank).map((c) => c.name)).toEqual(["results", "prompt_tokens", "error_code", "error_message"]);
    const results = [
      { index: 1, relevance_score: 0.9 },
      { index: 0, relevance_score: 0.2 },
    ];
    expect(columnsOfResponse(rerank, { results, usage: { prompt_tokens: 7 } })).toEqual({ results, prompt_tokens: 7 });
    const score = job({ endpoint: "/v1/score", body: { text_1: "{{q}}", text_2: ["{{a}}", "{{b}}"] } });
    expect(resultColumns(score).map((c) => c.name)).toEqual(["scores", "prompt_tokens", "error_code", "error_message"]);
    expect(
      columnsOfResponse(score, {
        data: [
          { index: 0, object: "score", score: 0.3 },
          { index: 1, object: "score", score: 0.6 },
        ],
        usage: { prompt_tokens: 5 },
      }),
    ).toEqual({ scores: [0.3, 0.6], prompt_tokens: 5 });
  });
});

describe("writeResults", () => {
  it("writes one line per row in input order, a failed or unparseable answer as the row's error", async () => {
    const j = job({ prompt: "x", response_format: schema });
    const output = await scratch.write(
      jsonl([
        ok(3, chatBody('{"label":"neg","confidence":0.25,"tags":["a"]}')),
        ok(1, chatBody('{"label":"pos","confidence":1}')),
        ok(4, chatBody('{"label": "po', "length")),
        { custom_id: customId(9, "ffffffffffff"), response: { status_code: 200, body: chatBody("{}") } },
      ]),
    );
    const errors = await scratch.write(
      jsonl([{ custom_id: customId(2, HASH), response: null, error: { code: "context_length_exceeded", message: "too long" } }]),
    );
    const target = await scratch.file("results.jsonl");
    const pass = await writeResults(j, { output, errors, rows: 4, hash: HASH, target, input: noRows });
    expect(pass).toMatchObject({ rows: 4, completed: 2, failed: 2 });
    const lines = readFileSync(target, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.label, l.error_code])).toEqual([
      ["pos", null],
      [null, "context_length_exceeded"],
      ["neg", null],
      [null, "invalid_json_output"],
    ]);
    expect(lines[0]).toMatchObject({ confidence: 1, tags: null, finish_reason: "stop", prompt_tokens: 10, cached_tokens: 4 });
    expect(lines[3]).toMatchObject({
      finish_reason: "length",
      completion_tokens: 3,
      error_message: expect.stringMatching(/not a JSON object/),
    });
  });

  it("refuses to write while a row has no result, and types a postprocess module's columns from their values", async () => {
    const j = job({ prompt: "x" });
    const output = await scratch.write(jsonl([ok(1, chatBody("a")), ok(2, chatBody("bb"))]));
    const target = await scratch.file("results.jsonl");
    await expect(writeResults(j, { output, errors: "/nope", rows: 3, hash: HASH, target, input: noRows })).rejects.toThrow(
      "row 3 has no result yet: run the job again to finish it",
    );
    const input: TableInput = {
      ...noRows,
      rows: async function* () {
        yield [{ id: 1 }, { id: 2 }];
      },
    };
    const pass = await writeResults(j, {
      output,
      errors: "/nope",
      rows: 2,
      hash: HASH,
      target,
      input,
      postprocess: (row, body) => ({
        length: ((body as { choices: [{ message: { content: string } }] }).choices[0].message.content.length * Number(row.id)) / 2,
      }),
    });
    expect(pass.columns.at(-1)).toEqual({ name: "length", type: "number" });
    expect(
      readFileSync(target, "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).length),
    ).toEqual([0.5, 2]);
  });
});
