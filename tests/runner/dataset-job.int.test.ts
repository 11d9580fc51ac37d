// Dataset jobs on the real engine through the runner: each input format to each output format with the types
// kept, every row present in input order (a failed row with its error), embeddings as a vector column, a JSON
// schema's fields as columns, stages, --dry-run, and the bad inputs that stop a job before anything runs.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { type Config, loadConfig } from "../../config/config.js";
import { testModelPath } from "../../testkit/model.js";
import { datasetCli } from "../helpers/dataset-cli.js";
import { scratchDir, tempDir } from "../helpers/scratch.js";
import { parquetFrom, readTable } from "../helpers/tables.js";

const scratch = scratchDir("dataset-job");
const batchDir = tempDir("obi-dataset-batches");
const planBatchDir = tempDir("obi-plan-batches");
let config: Config;
/** The same, on a BATCH_DIR of its own: its result cache holds only what this file's plans and runs put there. */
let planConfig: Config;
let dir: string;

beforeAll(async () => {
  // A BATCH_DIR of its own, and so a result cache: a job another run of this file answered is not answered whole.
  const settings = { MODEL_PATH: await testModelPath(), BATCH_DIR: batchDir, THREADS: "1", SEQUENCES: "4", CONTEXT_SIZE: "256" };
  config = loadConfig({ ...settings, EMBEDDING_CONTEXTS: "1" });
  dir = path.dirname(await scratch.write("", "keep"));
  planConfig = { ...config, batchDir: planBatchDir };
});

/** The runner as `npm run batch -- <argv>` runs it in `dir`, with its output captured. */
const batch = (...argv: string[]) => datasetCli(dir, config, ...argv);

const table = readTable;
const parquet = (name: string, sql: string) => parquetFrom(sql, path.join(dir, name));

const LONG = "word ".repeat(400);

describe("dataset jobs", () => {
  it("labels a CSV into Parquet: input columns kept, every row in order, a failed row kept with its error", async () => {
    writeFileSync(
      path.join(dir, "reviews.csv"),
      `id,review_text,lang,budget\n1,"Great, ""really"".\nTwo lines.",en,4\n2,${LONG},en,\n3,Bien,fr,2\n4,Okay,en,3\n`,
    );
    const job = path.join(dir, "label.yaml");
    writeFileSync(
      job,
      [
        "input: reviews.csv",
        "where: \"lang = 'en'\"",
        "messages:",
        '  - { role: system, content: "Label the review\'s sentiment." }',
        '  - { role: user, content: "{{review_text}}" }',
        "params: { max_tokens: 8, temperature: 0 }",
        "params_from: { max_tokens: budget }",
        "output: labeled.parquet",
        "keep: [id, review_text]",
      ].join("\n"),
    );
    const r = await batch("--job", job);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/wrote .*labeled\.parquet: 3 rows \(2 answered, 1 with an error in error_code\)/);
    const { types, rows } = await table(path.join(dir, "labeled.parquet"));
    expect(types).toMatchObject({
      id: "BIGINT",
      review_text: "VARCHAR",
      text: "VARCHAR",
      completion_tokens: "BIGINT",
      error_code: "VARCHAR",
    });
    expect(rows.map((x) => x.id)).toEqual([1, 2, 4]);
    expect(rows[0]).toMatchObject({ review_text: 'Great, "really".\nTwo lines.', error_code: null });
    // Each row's own max_tokens (4, then 3 from the budget column): reached, unless the model stopped first.
    const honoured = (row: Record<string, unknown>, budget: number) =>
      row.finish_reason === "length" ? row.completion_tokens === budget : (row.completion_tokens as number) <= budget;
    expect(honoured(rows[0], 4) && honoured(rows[2], 3), JSON.stringify(rows)).toBe(true);
    expect(rows[1]).toMatchObject({ text: null, error_code: expect.any(String), error_message: expect.stringMatching(/context|tokens/i) });
    expect(rows[2]).toMatchObject({ error_code: null });
    expect(typeof rows[0].text).toBe("string");

    // A failed row keeps the working folder, for --retry-failed.
    expect(r.stderr).toMatch(/kept the working folder .*reviews\.[0-9a-f]{12}\.work for --retry-failed \(1 rows failed\)/);
    const again = await batch("--job", job);
    expect(again).toMatchObject({ code: 0, stderr: expect.stringMatching(/complete already \(3 rows\)/) });
    // --retry-failed runs the failed row alone again (it fails again: its text is over the context) and re-joins.
    const retried = await batch("--job", job, "--retry-failed");
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stderr).toMatch(/retrying the failed requests/);
    expect(retried.stdout).toMatch(/running 1 requests|1 requests \(2 from the earlier run\)|3 requests \(2 from the earlier run\)/);
    const after = await table(path.join(dir, "labeled.parquet"));
    expect(after.rows.map((x) => [x.id, x.error_code === null])).toEqual([
      [1, true],
      [2, false],
      [4, true],
    ]);
  });

  it("keeps an input column named text under its own name, the answers beside it under result_, and says so", async () => {
    writeFileSync(path.join(dir, "notes.csv"), 'id,text,error_code\n1,Once upon a time,\n2,"",x\n3,The end,\n');
    const r = await batch(
      "-i",
      "notes.csv",
      "-o",
      "notes.jsonl",
      "--endpoint",
      "/v1/completions",
      "--prompt",
      "{{text}}",
      "--params",
      '{"max_tokens":3}',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /the input's 'text' is kept under its own name, so the answers' columns are named result_text, result_finish_reason/,
    );
    expect(r.stdout).toMatch(/3 rows \(\d answered, \d with an error in result_error_code\)/);
    const rows = readFileSync(path.join(dir, "notes.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(Object.keys(rows[0])).toEqual([
      "id",
      "text",
      "error_code",
      "result_text",
      "result_finish_reason",
      "result_prompt_tokens",
      "result_completion_tokens",
      "result_cached_tokens",
      "result_error_code",
      "result_error_message",
    ]);
    // The input's own values, an empty string and a missing value apart, beside the answers.
    expect(rows.map((x) => [x.id, x.text, x.error_code])).toEqual([
      [1, "Once upon a time", null],
      [2, "", "x"],
      [3, "The end", null],
    ]);
    expect(typeof rows[0].result_text).toBe("string");
  });

  it("embeds a Parquet corpus into a vector column: list<float32> in Parquet, JSON arrays in CSV and JSONL", async () => {
    await parquet("corpus.parquet", "SELECT i AS doc, 'document number ' || i AS body FROM range(5) t(i)");
    const r = await batch("-i", "corpus.parquet", "-o", "vectors.parquet", "--endpoint", "/v1/embeddings", "--prompt", "{{body}}");
    expect(r.code, r.stderr).toBe(0);
    const { types, rows } = await table(path.join(dir, "vectors.parquet"));
    expect(types.embedding).toBe("FLOAT[]");
    expect(rows.map((x) => x.doc)).toEqual([0, 1, 2, 3, 4]);
    expect((rows[0].embedding as number[]).length).toBeGreaterThan(8);
    // Embeddings generate no tokens: the rate is the prompt tokens'.
    expect(r.stdout).toMatch(/, [1-9]\d* prompt tok\/s\)/);
    // The working folder went once the output was whole; the record beside it remembers the output.
    expect(r.stderr).toMatch(/removed the working folder .*corpus\.[0-9a-f]{12}\.work/);
    expect(readdirSync(dir).filter((f) => f.startsWith("corpus.") && f.endsWith(".work"))).toEqual([]);
    // Another format of the same job is joined from that output: no row runs again.
    const csv = await batch("-i", "corpus.parquet", "-o", "vectors.csv", "--endpoint", "/v1/embeddings", "--prompt", "{{body}}");
    expect(csv, csv.stderr).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/wrote .*vectors\.csv: 5 rows, joined from .*vectors\.parquet \(no row ran again\)/),
    });
    expect(csv.stderr).not.toMatch(/running \d+ requests/);
    const csvRow = readFileSync(path.join(dir, "vectors.csv"), "utf8").split("\n")[1];
    expect(JSON.parse(csvRow.slice(csvRow.indexOf('"[') + 1, csvRow.lastIndexOf(']"') + 1))).toHaveLength(
      (rows[0].embedding as number[]).length,
    );
    expect(
      await batch("-i", "corpus.parquet", "-o", "vectors.jsonl", "--endpoint", "/v1/embeddings", "--prompt", "{{body}}", "--keep", "doc"),
    ).toMatchObject({ code: 0, stdout: expect.stringMatching(/joined from .*vectors\.parquet/) });
    const third = JSON.parse(readFileSync(path.join(dir, "vectors.jsonl"), "utf8").split("\n")[2]);
    expect(Object.keys(third)).toEqual(["doc", "embedding", "prompt_tokens", "error_code", "error_message"]);
    expect(third.doc).toBe(2);
    expect(third.embedding).toHaveLength((rows[2].embedding as number[]).length);
    expect(third.embedding[0]).toBeCloseTo(rows[2].embedding[0], 5);
    // Every row was answered: nothing to retry, and nothing runs.
    const retry = await batch(
      "-i",
      "corpus.parquet",
      "-o",
      "vectors.parquet",
      "--endpoint",
      "/v1/embeddings",
      "--prompt",
      "{{body}}",
      "--retry-failed",
    );
    expect(retry).toMatchObject({
      code: 0,
      stderr: expect.stringMatching(/nothing to retry: every row of .*vectors\.parquet was answered/),
    });
    // The same again: complete already; the CSV, joined from the Parquet, reads back as its vectors.
    expect(
      (await batch("-i", "corpus.parquet", "-o", "vectors.csv", "--endpoint", "/v1/embeddings", "--prompt", "{{body}}")).stderr,
    ).toMatch(/complete already/);
    // With --remote the job is the server's: its rows are asked of it (nothing listens there), not joined from ours.
    const remote = await batch(
      "-i",
      "corpus.parquet",
      "-o",
      "remote.jsonl",
      "--endpoint",
      "/v1/embeddings",
      "--prompt",
      "{{body}}",
      "--remote",
      "http://127.0.0.1:9",
    );
    expect(remote.code).not.toBe(0);
    expect(remote.stdout).not.toMatch(/joined from/);
  });

  it("keeps each input type through every output format, from JSONL, TSV and Parquet inputs", async () => {
    const src = await parquet(
      "typed.parquet",
      `SELECT i AS n, (i * 0.5)::DOUBLE AS x, CASE WHEN i = 1 THEN NULL ELSE 'v' || i END AS s, [i, 2 * i] AS l, E'a\\n"b",' || i AS q, 9007199254740993 + i AS big FROM range(3) t(i)`,
    );
    const prompt = ["--endpoint", "/v1/completions", "--prompt", "{{n}}: {{q}} {{big}}", "--params", '{"max_tokens":2,"temperature":0}'];
    expect(await batch("-i", src, "-o", "typed-out.parquet", ...prompt, "--keep-work")).toMatchObject({ code: 0 });
    // A 64-bit integer past 2^53 goes into a prompt digit for digit.
    const work = readdirSync(dir).find((f) => /^typed\.[0-9a-f]{12}\.work$/.test(f))!;
    const sent = readFileSync(path.join(dir, work, "requests.jsonl"), "utf8")
      .trim()
      .split("\n");
    expect(JSON.parse(sent[2]).body.prompt).toBe('2: a\n"b",2 9007199254740995');
    const back = await table(path.join(dir, "typed-out.parquet"));
    expect(back.types).toMatchObject({ n: "BIGINT", x: "DOUBLE", s: "VARCHAR", l: "BIGINT[]", q: "VARCHAR", big: "BIGINT" });
    expect(back.rows.map((r) => [r.n, r.x, r.s, r.l, r.q, r.big])).toEqual([
      [0, 0, "v0", [0, 0], 'a\n"b",0', "9007199254740993"],
      [1, 0.5, null, [1, 2], 'a\n"b",1', "9007199254740994"],
      [2, 1, "v2", [2, 4], 'a\n"b",2', "9007199254740995"],
    ]);
    for (const out of ["typed-out.jsonl", "typed-out.tsv", "typed-out.csv"]) {
      expect(await batch("-i", "typed-out.parquet", "-o", out, ...prompt, "--keep", "n,x,s,l,q,big")).toMatchObject({ code: 0 });
      const { rows } = await table(path.join(dir, out));
      expect(rows.map((r) => [r.n, r.x, r.s, r.q, r.big])).toEqual(back.rows.map((r) => [r.n, r.x, r.s, r.q, r.big]));
      expect(rows[1].l).toEqual(out.endsWith(".jsonl") ? [1, 2] : "[1,2]");
    }
    writeFileSync(path.join(dir, "rows.ndjson"), '{"t":"hello"}\n{"t":"world"}\n');
    expect(
      await batch("-i", "rows.ndjson", "-o", "rows-out.tsv", ...prompt.slice(0, 2), "--prompt", "{{t}}", "--params", '{"max_tokens":2}'),
    ).toMatchObject({ code: 0 });
    expect((await table(path.join(dir, "rows-out.tsv"))).rows.map((r) => r.t)).toEqual(["hello", "world"]);
  });

  it("writes a JSON schema's fields as typed columns, and runs generate-then-judge as two stages", async () => {
    writeFileSync(path.join(dir, "topics.csv"), "topic\ncats\ndogs\n");
    const judge = {
      type: "json_schema",
      json_schema: {
        name: "verdict",
        strict: true,
        schema: { type: "object", properties: { good: { type: "boolean" } }, required: ["good"], additionalProperties: false },
      },
    };
    writeFileSync(
      path.join(dir, "stages.yaml"),
      JSON.stringify({
        params: { temperature: 0 },
        stages: [
          { input: "topics.csv", output: "gen.parquet", prompt: "Write about {{topic}}.", params: { max_tokens: 6 } },
          {
            output: "judged.jsonl",
            prompt: "Is this good? {{text}}",
            response_format: judge,
            params: { max_tokens: 30 },
            keep: ["topic", "text"],
          },
        ],
      }),
    );
    const r = await batch("--job", "stages.yaml");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/stage 1 of 2: wrote .*gen\.parquet: 2 rows[\s\S]*stage 2 of 2: wrote .*judged\.jsonl: 2 rows/);
    const rows = readFileSync(path.join(dir, "judged.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows.map((x) => x.topic)).toEqual(["cats", "dogs"]);
    for (const row of rows) expect(row.error_code === null ? typeof row.good : row.error_code).toMatch(/boolean|invalid_json_output/);
    const again = await batch("--job", "stages.yaml");
    expect(again.stderr).toMatch(/stage 1 of 2: .* complete already[\s\S]*stage 2 of 2: .* complete already/);
  });

  it("takes a preprocess and a postprocess module in TypeScript, Ray Data LLM's hooks", async () => {
    writeFileSync(path.join(dir, "animals.csv"), "animal\ncat\nowl\n");
    writeFileSync(
      path.join(dir, "prep.ts"),
      "export default (row: { animal: string }) => ({ messages: [{ role: 'user', content: `Tell me of the ${row.animal}` }], max_tokens: 4 });\n",
    );
    writeFileSync(
      path.join(dir, "post.ts"),
      "export default (row: { animal: string }, r: { usage: { completion_tokens: number } }) => ({ shout: row.animal.toUpperCase(), spent: r.usage.completion_tokens <= 4 ? row.animal.length * 1.5 : -1 });\n",
    );
    const r = await batch("-i", "animals.csv", "-o", "animals.parquet", "--preprocess", "prep.ts", "--postprocess", "post.ts");
    expect(r.code, r.stderr).toBe(0);
    const { types, rows } = await table(path.join(dir, "animals.parquet"));
    expect(types).toMatchObject({ animal: "VARCHAR", text: "VARCHAR", shout: "VARCHAR", spent: "DOUBLE" });
    expect(rows.map((x) => [x.animal, x.shout, x.spent])).toEqual([
      ["cat", "CAT", 4.5],
      ["owl", "OWL", 4.5],
    ]);
    writeFileSync(
      path.join(dir, "broken.ts"),
      "export default (row: { animal: string }) => { if (row.animal === 'owl') throw new Error('no owls'); return { messages: [{ role: 'user', content: 'hi' }] }; };\n",
    );
    const broken = await batch("-i", "animals.csv", "-o", "broken.parquet", "--preprocess", "broken.ts");
    expect(broken).toMatchObject({ code: 2, stdout: "" });
    expect(broken.stderr.trim()).toMatch(/animals\.csv: row 2: preprocess failed: no owls$/);
    writeFileSync(path.join(dir, "nofn.ts"), "export const x = 1;\n");
    expect((await batch("-i", "animals.csv", "-o", "nofn.parquet", "--preprocess", "nofn.ts")).stderr).toMatch(
      /preprocess: .*nofn\.ts exports no function/,
    );
  });

  it("stops a bad job before anything runs, with one line naming the file, the row and the column", async () => {
    writeFileSync(path.join(dir, "bad.csv"), "id,body,budget\n1,a,3\n2,,3\n3,c,lots\n");
    const cases: Array<[string[], RegExp]> = [
      [["--prompt", "{{txt}}"], /^error: .*bad\.csv: prompt: no column 'txt' \(the input has 'id', 'body', 'budget'\)$/],
      [
        ["--prompt", "{{body}}"],
        /^error: .*bad\.csv: row 2, column 'body': column 'body' is null \(leave such rows out with where: "body" IS NOT NULL\)$/,
      ],
      [["--prompt", "{{id}}", "--params-from", '{"max_tokens":"budget"}'], /^error: .*bad\.csv: row 1, column 'budget': .*/],
      [["--prompt", "{{id}}", "--where", "nope > 1"], /^error: where: .*nope/],
      [["--prompt", "{{id}}", "--where", "id IN (SELECT id FROM 'bad.csv')"], /^error: where: a subquery .* reads beyond the row/],
      [["--prompt", "{{id}}", "--where", "version() LIKE 'v%'"], /^error: where: version\(\) reads state beyond the row/],
      [["--prompt", "{{id}}", "--keep", "id,body,text2"], /keep: no column 'text2'/],
    ];
    writeFileSync(path.join(dir, "text.csv"), "text\nx\n");
    const before = readdirSync(dir).sort();
    for (const [flags, message] of cases) {
      const r = await batch("-i", "bad.csv", "-o", "bad-out.parquet", ...flags);
      expect(r, flags.join(" ")).toMatchObject({ code: 2, stdout: "" });
      expect(r.stderr.trim(), flags.join(" ")).toMatch(message);
      expect(existsSync(path.join(dir, "bad-out.parquet"))).toBe(false);
    }
    const clash = await batch("-i", "text.csv", "-o", "clash.parquet", "--prompt", "{{text}}", "--result-prefix", "");
    expect(clash.stderr.trim()).toMatch(
      /^error: .*text\.csv: result_prefix: '' names a result column 'text', as the input column the output keeps/,
    );
    const models = path.join(dir, "models.yaml");
    writeFileSync(models, `models:\n  - name: tiny\n    local: { path: ${await testModelPath()} }\n`);
    writeFileSync(path.join(dir, "q.csv"), "q\nx\n");
    const unserved = await batch("-i", "q.csv", "-o", "m.parquet", "--prompt", "{{q}}", "--job-model", "big", "--models-file", models);
    expect(unserved.code).toBe(2);
    expect(unserved.stderr).toMatch(/the model 'big' is not in the models file; it serves tiny/);
    expect(existsSync(path.join(dir, "m.parquet"))).toBe(false);
    // A job refused before it ran leaves nothing behind: no working folder, no record.
    expect(readdirSync(dir).sort()).toEqual([...before, "models.yaml", "q.csv"].sort());
    // Rows naming two models are refused as a batch file naming two is, before anything runs.
    writeFileSync(path.join(dir, "two.csv"), "q,m\nx,tiny\ny,other\n");
    const two = await batch(
      "-i",
      "two.csv",
      "-o",
      "two.parquet",
      "--prompt",
      "{{q}}",
      "--params-from",
      '{"model":"m"}',
      "--models-file",
      models,
    );
    expect(two.code).toBe(2);
    expect(two.stderr).toMatch(
      /line 2: mismatched_model: All requests in a batch must use the same model: this line names 'other', earlier lines 'tiny'/,
    );
    expect(existsSync(path.join(dir, "two.parquet"))).toBe(false);
  });
});

describe("--dry-run", () => {
  it("previews the first three requests compactly, what they share once, the columns in one vocabulary, and plans the job", async () => {
    writeFileSync(path.join(dir, "dry.csv"), 'id,q\n1,a\n2,""\n3,c\n4,d\n');
    const schema = {
      type: "json_schema",
      json_schema: {
        name: "verdict",
        strict: true,
        schema: { type: "object", properties: { label: { type: "string" }, score: { type: "integer" } }, required: ["label", "score"] },
      },
    };
    const before = readdirSync(dir).sort();
    const dry = (out: string) =>
      datasetCli(
        dir,
        planConfig,
        "-i",
        "dry.csv",
        "-o",
        out,
        "--prompt",
        "Say {{q}}",
        "--response-format",
        JSON.stringify(schema),
        "--params",
        '{"max_tokens":16,"temperature":0}',
        "--dry-run",
      );
    const r = await dry("dry.parquet");
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/dry\.csv: 4 rows, each a request to \/v1\/chat\/completions; the first 3:$/);
    expect(lines[1]).toBe('  row 1: {"messages":[{"role":"user","content":"Say a"}]}');
    // A quoted empty field is an empty string, which a template takes.
    expect(lines[2]).toBe('  row 2: {"messages":[{"role":"user","content":"Say "}]}');
    expect(lines.slice(4, 8)).toEqual([
      "  and in each of them:",
      expect.stringMatching(/^ {4}response_format: \{"type":"json_schema","json_schema":\{"name":"verdict",.*\}$/),
      "    max_tokens: 16",
      "    temperature: 0",
    ]);
    expect(r.stdout.match(/"verdict"/g)).toHaveLength(1);
    expect(lines.slice(8, 19)).toEqual([
      "dry.parquet will hold 10 columns:",
      "  id                 BIGINT   (input)",
      "  q                  VARCHAR  (input)",
      "  label              VARCHAR",
      "  score              BIGINT",
      "  finish_reason      VARCHAR",
      "  prompt_tokens      BIGINT",
      "  completion_tokens  BIGINT",
      "  cached_tokens      BIGINT",
      "  error_code         VARCHAR",
      "  error_message      VARCHAR",
    ]);
    // The plan, as --plan gives a batch file's: the rows counted by the model's own tokenizer, nothing run.
    expect(lines[19]).toMatch(
      /^plan: 4 lines on \S+, 4 distinct requests, 0 cached; \d+ prompt tokens \(the model's tokenizer\), at most 64 generated; about \d+ s\. Nothing was run\.$/,
    );
    const plan = JSON.parse(lines.slice(20).join("\n"));
    expect(plan).toMatchObject({ object: "batch.plan", lines: 4, distinct_requests: 4, cached_lines: 0, tokenizer: "model" });
    expect(readdirSync(dir).sort()).toEqual([...before]);
    // Once the job has run, its answers are in the cache: planned again (into another format), every row is cached.
    const flags = ["--prompt", "Say {{q}}", "--response-format", JSON.stringify(schema), "--params", '{"max_tokens":16,"temperature":0}'];
    const ran = await datasetCli(dir, planConfig, "-i", "dry.csv", "-o", "dry.parquet", ...flags);
    expect(ran.code, ran.stderr).toBe(0);
    const again = await dry("dry.csv.jsonl");
    expect(again.stdout).toMatch(/^plan: 4 lines on \S+, 4 distinct requests, 4 cached;/m);
  });
});
