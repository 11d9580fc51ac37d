// A dataset job's file and flags: templates and their rows, the job's checks, stages, and the request body each
// endpoint gets from a row.
import path from "node:path";
import { describe, expect, it } from "vitest";
import { checkFields, checkFlags, type Job, JobError, planStages, readJobFile } from "../../datasets/job.js";
import { bodyOf, checkColumns, customId, jobHash, rowOf, writeRequests } from "../../datasets/requests.js";
import { DatasetError, type TableInput } from "../../datasets/tables.js";
import { columnsOf, RenderError, type Row, render } from "../../datasets/template.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("job");

const job = (fields: Record<string, unknown>): Job =>
  planStages(undefined, "/data", checkFlags({ input: "in.csv", output: "out.parquet", ...fields }), "/data")[0];

function jobError(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(JobError);
    return (err as Error).message;
  }
  throw new Error("no JobError");
}

describe("templates", () => {
  it("fills {{column}} placeholders in every string, spaces in the braces ignored and \\{{ kept literal", () => {
    const t = { a: ["{{ name }} is {{age}}", "\\{{name}} stays"], n: 3 };
    expect(columnsOf(t)).toEqual(["name", "age"]);
    expect(render(t, { name: "Ann", age: 41 })).toEqual({ a: ["Ann is 41", "{{name}} stays"], n: 3 });
  });

  it("writes lists and structs as JSON, 64-bit integers as their digits, and refuses a null or a missing column", () => {
    expect(render("{{x}} {{y}} {{z}}", { x: [1, "a"], y: { k: true }, z: 9007199254740993n })).toBe('[1,"a"] {"k":true} 9007199254740993');
    expect(() => render("{{x}}", { x: null })).toThrow(
      new RenderError("x", `column 'x' is null (leave such rows out with where: "x" IS NOT NULL)`),
    );
    expect(() => render("{{x}}", {})).toThrow(/no column 'x'/);
  });
});

describe("the job's fields", () => {
  it("resolves paths against the job file's folder and flags against the working folder, flags winning", async () => {
    const file = await scratch.write("input: data/in.csv\noutput: out.jsonl\nprompt: '{{t}}'\nendpoint: /v1/completions\n", "job.yaml");
    const { fields, dir } = await readJobFile(file);
    const [j] = planStages(fields, dir, checkFlags({ output: "mine.parquet", limit: 5 }), "/home/me");
    expect(j).toMatchObject({
      input: path.join(dir, "data/in.csv"),
      output: "/home/me/mine.parquet",
      endpoint: "/v1/completions",
      limit: 5,
    });
  });

  it("runs stages in order, each reading the one before's output unless it names an input, with the top level as defaults", () => {
    const stages = planStages(
      {
        model: "m",
        params: { temperature: 0 },
        stages: [
          { input: "in.csv", output: "gen.parquet", prompt: "{{q}}" },
          { output: "judged.csv", messages: [{ role: "user", content: "Judge: {{text}}" }] },
        ],
      },
      "/jobs",
      {},
      "/",
    );
    expect(stages.map((s) => [s.input, s.output, s.model])).toEqual([
      ["/jobs/in.csv", "/jobs/gen.parquet", "m"],
      ["/jobs/gen.parquet", "/jobs/judged.csv", "m"],
    ]);
  });

  it("says which field is wrong, in one line", async () => {
    expect(jobError(() => checkFlags({ limit: 0 }))).toMatch(/^--limit: /);
    expect(jobError(() => checkFlags({ params_from: { a: 1 } }))).toMatch(/^--params-from: /);
    expect(jobError(() => checkFlags({ model: 3 }))).toMatch(/^--job-model: /);
    expect(jobError(() => checkFlags({ prompts: "x" }))).toBe("job: unknown field 'prompts' (did you mean 'prompt'?)");
    expect(jobError(() => checkFlags({ messages: [{ role: "user", content: "x", rol: "system" }] }))).toBe(
      "--messages: unknown field 'rol' (did you mean 'role'?)",
    );
    expect(jobError(() => checkFlags({ endpoint: "/v1/nope" }))).toBe(
      "--endpoint: must be one of /v1/responses, /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/messages, /v1/rerank, /v1/score",
    );
    expect(jobError(() => checkFields({ limit: 0 }, "job"))).toMatch(/^job: limit: /);
    expect(jobError(() => job({ prompt: "a", endpoint: "/v1/messages" }))).toMatch(
      /model: \/v1\/messages names the model in every request/,
    );
    expect(jobError(() => job({}))).toMatch(/exactly one of messages, prompt, body or preprocess \(none is set\)/);
    expect(jobError(() => job({ prompt: "a", messages: [{ role: "user", content: "b" }] }))).toMatch(/messages and prompt are/);
    expect(jobError(() => job({ prompt: "a", output: "in.csv" }))).toMatch(/output: must not be the input/);
    expect(jobError(() => job({ messages: [{ role: "user", content: "b" }], endpoint: "/v1/embeddings" }))).toMatch(/takes a prompt/);
    expect(jobError(() => job({ prompt: "a", endpoint: "/v1/rerank" }))).toMatch(
      /prompt: \/v1\/rerank takes a query and documents: give them in a body template/,
    );
    expect(jobError(() => job({ messages: [{ role: "user", content: "b" }], endpoint: "/v1/score" }))).toMatch(
      /messages: \/v1\/score takes text_1 and text_2/,
    );
    expect(jobError(() => job({ prompt: "a", params: { messages: [] } }))).toMatch(/params\.messages: set by the job itself/);
    expect(jobError(() => job({ prompt: "a", params: { n: 2 } }))).toMatch(/params\.n: .*n must be 1/);
    // A misspelt parameter is named with the nearest one the endpoint takes, in params and params_from alike.
    expect(jobError(() => job({ prompt: "a", params: { max_token: 8 } }))).toBe(
      "job: params.max_token: /v1/chat/completions takes no parameter 'max_token' (did you mean 'max_tokens'?)",
    );
    expect(jobError(() => job({ prompt: "a", endpoint: "/v1/completions", params_from: { temprature: "t" } }))).toMatch(
      /params_from\.temprature: \/v1\/completions takes no parameter 'temprature' \(did you mean 'temperature'\?\)$/,
    );
    expect(jobError(() => job({ prompt: "a", params: { zzzzqqq: 1 } }))).toMatch(/takes no parameter 'zzzzqqq'$/);
    // Log probabilities have no column in the table: refused, unless a postprocess module keeps them.
    expect(jobError(() => job({ prompt: "a", params: { logprobs: true, top_logprobs: 2 } }))).toMatch(
      /^job: params\.logprobs: the table has no column for log probabilities/,
    );
    expect(jobError(() => job({ prompt: "a", endpoint: "/v1/completions", params: { logprobs: 2 } }))).toMatch(/params\.logprobs: /);
    expect(job({ prompt: "a", params: { logprobs: true }, postprocess: "post.mjs" }).params).toEqual({ logprobs: true });
    expect(jobError(() => job({ prompt: "a", endpoint: "/v1/embeddings", response_format: { type: "json_object" } }))).toMatch(
      /response_format: works with/,
    );
    const bad = await scratch.write("input: [unclosed\n", "bad.yaml");
    await expect(readJobFile(bad)).rejects.toThrow(/bad\.yaml: not YAML or JSON/);
    await expect(readJobFile("/nope/job.yaml")).rejects.toThrow("/nope/job.yaml: no such job file");
  });

  it("checks every column the job reads against the input before any row", () => {
    const j = job({ prompt: "{{text}}", params_from: { max_tokens: "budget" }, keep: ["id"] });
    const cols = (...names: string[]) => names.map((name) => ({ name, type: "VARCHAR" }));
    expect(() => checkColumns(j, cols("id", "text", "budget"), "in.csv")).not.toThrow();
    expect(() => checkColumns(j, cols("id", "budget"), "in.csv")).toThrow(
      new DatasetError("in.csv: prompt: no column 'text' (the input has 'id', 'budget')"),
    );
    expect(() => checkColumns(j, cols("id", "text"), "in.csv")).toThrow(/params_from: no column 'budget'/);
    // A file read as one column whose name holds another separator says so.
    expect(() => checkColumns(job({ prompt: "{{text}}" }), cols("id:text"), "in.csv")).toThrow(
      "in.csv: prompt: no column 'text' (the input has 'id:text'); it was read as one column, whose name holds ':': save it with commas (or tabs, as a .tsv)",
    );
  });
});

describe("a row's request", () => {
  const row = { q: "Why?", sys: "Be brief.", budget: 7n, t: null };
  const messages = [
    { role: "system", content: "{{sys}}" },
    { role: "user", content: "{{q}}" },
  ];
  const schema = { type: "json_schema", json_schema: { name: "r", schema: { type: "object", properties: { a: { type: "string" } } } } };

  it("takes each endpoint's shape, with params, per-row params (a null leaves the default) and the model", async () => {
    const base = { params: { temperature: 0 }, params_from: { max_tokens: "budget", top_p: "t" }, model: "m" };
    expect(await bodyOf(job({ ...base, messages, response_format: schema }), row)).toEqual({
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Why?" },
      ],
      response_format: schema,
      model: "m",
      temperature: 0,
      max_tokens: 7,
    });
    expect(await bodyOf(job({ prompt: "Q: {{q}}", endpoint: "/v1/completions" }), row)).toEqual({ prompt: "Q: Why?" });
    expect(await bodyOf(job({ prompt: "{{q}}", endpoint: "/v1/embeddings" }), row)).toEqual({ input: "Why?" });
    expect(await bodyOf(job({ messages, endpoint: "/v1/responses", response_format: schema }), row)).toEqual({
      input: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Why?" },
      ],
      text: { format: { type: "json_schema", name: "r", schema: schema.json_schema.schema } },
    });
    expect(await bodyOf(job({ messages, endpoint: "/v1/messages", model: "m", params: { max_tokens: 5 } }), row)).toEqual({
      model: "m",
      system: "Be brief.",
      messages: [{ role: "user", content: "Why?" }],
      max_tokens: 5,
    });
    expect(await bodyOf(job({ body: { prompt: "{{q}}", echo: false }, endpoint: "/v1/completions" }), row)).toEqual({
      prompt: "Why?",
      echo: false,
    });
    expect(await bodyOf(job({ preprocess: "p.ts" }), row, (r) => ({ messages: [{ role: "user", content: String(r.q) }] }))).toEqual({
      messages: [{ role: "user", content: "Why?" }],
    });
  });

  it("names rows by their place and the job's hash, which the template and the input's files change", async () => {
    expect(rowOf(customId(12, "0123456789ab"), "0123456789ab")).toBe(12);
    expect(rowOf(customId(12, "0123456789ab"), "ba9876543210")).toBeUndefined();
    expect(rowOf("line-1", "0123456789ab")).toBeUndefined();
    const file = await scratch.write("a\n1\n", "in.csv");
    const h1 = await jobHash(job({ prompt: "{{a}}" }), [file]);
    expect(await jobHash(job({ prompt: "{{a}}" }), [file])).toBe(h1);
    expect(await jobHash(job({ prompt: "{{a}}!" }), [file])).not.toBe(h1);
    expect(await jobHash(job({ prompt: "{{a}}", keep: ["a"] }), [file])).toBe(h1);
    expect(await jobHash(job({ prompt: "{{a}}" }), [await scratch.write("a\n2\n", "in.csv")])).not.toBe(h1);
  });
});

describe("a dataset's request lines and what a batch takes", () => {
  const input = (rows: Row[]): TableInput => ({
    files: [],
    columns: [],
    rows: async function* () {
      yield rows;
    },
    count: async () => rows.length,
  });
  const rows = [{ text: "short" }, { text: "short too" }, { text: "x".repeat(2_000) }];
  const write = async (j: Job, sizes: { maxLineBytes: number; maxFileBytes: number }) =>
    writeRequests(j, input(rows), await scratch.file("requests.jsonl"), { hash: "0123456789ab", label: "in.csv", sizes }).then(
      () => "written",
      (err: Error) => {
        expect(err).toBeInstanceOf(DatasetError);
        return err.message;
      },
    );

  it("says how many lines it wrote and the model they name: the first named, and whether others name another", async () => {
    const sizes = { maxLineBytes: 10_000, maxFileBytes: 100_000 };
    const written = async (j: Job, rs: Row[]) =>
      writeRequests(j, input(rs), await scratch.file("models.jsonl"), { hash: "0123456789ab", label: "in.csv", sizes });
    expect(await written(job({ prompt: "{{text}}" }), rows)).toEqual({ rows: 3, mixedModels: false });
    expect(await written(job({ prompt: "{{text}}", model: "m" }), rows)).toEqual({ rows: 3, model: "m", mixedModels: false });
    const named = [
      { text: "a", m: null },
      { text: "b", m: "x" },
      { text: "c", m: "x" },
    ];
    const byRow = job({ prompt: "{{text}}", params_from: { model: "m" } });
    expect(await written(byRow, named)).toEqual({ rows: 3, model: "x", mixedModels: false });
    expect(await written(byRow, [...named, { text: "d", m: "y" }])).toEqual({ rows: 4, model: "x", mixedModels: true });
  });

  it("refuses a row whose request passes MAX_LINE_BYTES, naming the row as a user counts it and the setting", async () => {
    expect(await write(job({ prompt: "{{text}}" }), { maxLineBytes: 1_000, maxFileBytes: 10_000 })).toMatch(
      /^in\.csv: row 3: its request is \d+ bytes, more than MAX_LINE_BYTES \(1000\), the longest line a batch takes$/,
    );
    expect(await write(job({ prompt: "{{text}}" }), { maxLineBytes: 10_000, maxFileBytes: 10_000 })).toBe("written");
  });

  it("refuses request lines that pass MAX_FILE_BYTES, naming the setting and the row they pass it at", async () => {
    expect(await write(job({ prompt: "{{text}}" }), { maxLineBytes: 10_000, maxFileBytes: 1_000 })).toMatch(
      /^in\.csv: its request lines pass MAX_FILE_BYTES \(1000 bytes\) at row 3, the largest input file a batch takes: /,
    );
  });

  it("says a row's number among those the where keeps, where a where filters", async () => {
    expect(await write(job({ prompt: "{{text}}", where: "true" }), { maxLineBytes: 1_000, maxFileBytes: 10_000 })).toMatch(
      /^in\.csv: row 3 of those the where keeps: its request is/,
    );
  });

  it("blames a bad value the job's params give on the job's field, not on the first row; a row's value on its row", async () => {
    const sizes = { maxLineBytes: 10_000, maxFileBytes: 10_000 };
    const refused = await writeRequests(
      job({ prompt: "{{text}}", where: "true", params: { temperature: "hot" } }),
      input(rows),
      await scratch.file("r.jsonl"),
      {
        hash: "0123456789ab",
        label: "in.csv",
        sizes,
      },
    ).catch((e) => e);
    expect(refused).toBeInstanceOf(JobError);
    expect(refused.field).toBe("params.temperature");
    expect(refused.message).toMatch(/^params\.temperature: Invalid 'temperature'/);
    // A value a template makes of the row's text is the row's.
    expect(await write(job({ prompt: "{{text}}", params: { temperature: "{{text}}" } }), sizes)).toMatch(/^in\.csv: row 1: /);
  });

  it("names the nearest parameter for a body template's misspelt key, and refuses its logprobs as params' are", async () => {
    const messages = [{ role: "user", content: "{{text}}" }];
    const sizes = { maxLineBytes: 10_000, maxFileBytes: 10_000 };
    expect(await write(job({ body: { messages, max_token: 3 } }), sizes)).toBe(
      "in.csv: row 1: Unrecognized request argument supplied: 'max_token' (did you mean 'max_tokens'?)",
    );
    expect(await write(job({ body: { messages, logprobs: true } }), sizes)).toMatch(
      /^in\.csv: row 1: logprobs: the table has no column for log probabilities/,
    );
  });
});
