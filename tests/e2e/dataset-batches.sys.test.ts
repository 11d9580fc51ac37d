// Dataset jobs through the service's API and console: a CSV uploaded with the official client becomes a batch
// (OpenAI's object to the letter), its table downloads in each format with every row in order, every bad job or
// dataset is a 400 naming what is wrong with nothing created, a `where` cannot reach another file, and the
// console's batch page downloads the table at 1,280 and 390 px in headless Chromium.
import { mkdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { toFile } from "openai";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { haveChromium, launchChromium } from "../helpers/browser.js";
import { openaiClient, startTestService, type TestService, waitForBatch } from "../helpers/service.js";

const SHOTS = process.env.CONSOLE_SCREENSHOTS ?? path.join(os.tmpdir(), "obi-screens");
const REVIEWS = 'id,lang,review_text\n1,en,"Great, ""really"".\nTwo lines."\n2,de,Gut\n3,en,Bad\n4,en,Fine\n';
let svc: TestService;
/** The service's log lines, as JSON text. */
const logs: string[] = [];

beforeAll(async () => {
  svc = await startTestService({}, { logger: pino({ level: "info" }, { write: (line: string) => logs.push(line) }) });
});
afterAll(async () => svc?.close());

async function upload(content: string, name: string): Promise<string> {
  return (await openaiClient(svc).files.create({ file: await toFile(Buffer.from(content), name), purpose: "batch" })).id;
}

async function post(body: unknown) {
  const res = await fetch(`${svc.baseUrl}/v1/dataset_batches`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

const labelJob = {
  messages: [{ role: "user", content: "Label: {{review_text}}" }],
  where: "lang = 'en'",
  params: { max_tokens: 3 },
  keep: ["id", "review_text"],
};

describe("dataset batches over HTTP", () => {
  let batchId: string;

  it("makes an uploaded CSV into an ordinary batch and serves it back as a table in each format", async () => {
    const input = await upload(REVIEWS, "reviews.csv");
    const created = await post({
      input_file_id: input,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { team: "a" },
      job: labelJob,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    batchId = created.body.id;
    const done = await openaiClient(svc).batches.retrieve((await waitForBatch(svc.baseUrl, batchId)).id);
    expect(done).toMatchObject({ status: "completed", request_counts: { total: 3, completed: 3, failed: 0 } });
    expect(done.metadata).toMatchObject({ team: "a", dataset_input_file_id: input, dataset_job_file_id: expect.stringMatching(/^file-/) });
    const lines = (await (await openaiClient(svc).files.content(done.input_file_id)).text()).trim().split("\n");
    expect(JSON.parse(lines[0]).custom_id).toMatch(/^row-1-[0-9a-f]{12}$/);

    const jsonl = await fetch(`${svc.baseUrl}/v1/batches/${batchId}/table?format=jsonl`);
    expect(jsonl.headers.get("content-type")).toBe("application/jsonl");
    expect(jsonl.headers.get("content-disposition")).toMatch(/reviews\.jsonl/);
    const rows = (await jsonl.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows.map((r) => [r.id, r.error_code])).toEqual([
      [1, null],
      [3, null],
      [4, null],
    ]);
    expect(rows[0].review_text).toBe('Great, "really".\nTwo lines.');
    expect(typeof rows[0].text).toBe("string");
    const parquet = Buffer.from(await (await fetch(`${svc.baseUrl}/v1/batches/${batchId}/table`)).arrayBuffer());
    expect(parquet.subarray(0, 4).toString()).toBe("PAR1");
    const csv = await (await fetch(`${svc.baseUrl}/v1/batches/${batchId}/table?format=csv`)).text();
    expect(csv.split("\n")[0]).toBe(
      "id,review_text,text,finish_reason,prompt_tokens,completion_tokens,cached_tokens,error_code,error_message",
    );
  });

  it("answers a bad job, dataset or download with a 400 that names it, and creates nothing", async () => {
    const input = await upload(REVIEWS, "reviews.csv");
    const base = { input_file_id: input, endpoint: "/v1/chat/completions", completion_window: "24h" };
    const batchesBefore = (await openaiClient(svc).batches.list()).data.length;
    const cases: Array<[unknown, RegExp, string | null]> = [
      [
        { ...base, job: { prompt: "{{review}}" } },
        /reviews\.csv: prompt: no column 'review' \(the input has 'id', 'lang', 'review_text'\)/,
        null,
      ],
      [{ ...base, job: { prompt: "{{id}}", output: "x.csv" } }, /job\.output is not taken here/, "job.output"],
      [{ ...base, job: { preprocess: "./prep.ts" } }, /runs no uploaded code/, "job.preprocess"],
      [
        { ...base, job: { prompt: "{{id}}", temperature: 1 } },
        /^job: unknown field 'temperature' \(valid fields: .*\bparams\b.*\)$/,
        "job",
      ],
      [{ ...base, job: { prompt: "{{id}}", limit: 0 } }, /job\.limit/, "job.limit"],
      [{ ...base, job: {} }, /exactly one of messages, prompt, body or preprocess/, "job"],
      [
        { ...base, job: { prompt: "{{id}}", where: "EXISTS (SELECT 1 FROM read_text('/etc/passwd'))" } },
        /^where: a subquery \(SELECT \.\.\., EXISTS, IN \(SELECT \.\.\.\)\) reads beyond the row/,
        "job.where",
      ],
      [
        { ...base, job: { prompt: "{{id}}" }, metadata: { dataset_job_file_id: "x" } },
        /set by the service/,
        "metadata.dataset_job_file_id",
      ],
      [
        { ...base, input_file_id: await upload("hello", "notes.txt"), job: { prompt: "{{a}}" } },
        /not a dataset: its name must end in/,
        "input_file_id",
      ],
      [{ ...base, input_file_id: await upload("", "empty.csv"), job: { prompt: "{{a}}" } }, /empty\.csv: empty file/, null],
      [{ ...base, job: { prompt: "{{id}}" }, extra: 1 }, /extra/, null],
      [
        { ...base, job: { prompt: "{{id}}", params: { max_token: 8 } } },
        /^job\.params\.max_token: \/v1\/chat\/completions takes no parameter 'max_token' \(did you mean 'max_tokens'\?\)$/,
        "job.params.max_token",
      ],
      [
        { ...base, job: { prompt: "{{id}}", where: "lang = 'en'", params: { temperature: "hot" } } },
        /^job\.params\.temperature: Invalid 'temperature'/,
        "job.params.temperature",
      ],
      [
        { ...base, job: { prompt: "{{id}}", params: { logprobs: true, top_logprobs: 3 } } },
        /^job\.params\.logprobs: the table has no column for log probabilities/,
        "job.params.logprobs",
      ],
      [
        { ...base, input_file_id: await upload(`id,text\n1,short\n2,${"x".repeat(1_100_000)}\n`, "long.csv"), job: { prompt: "{{text}}" } },
        /^long\.csv: row 2: its request is \d+ bytes, more than MAX_LINE_BYTES \(1048576\), the longest line a batch takes$/,
        null,
      ],
      [
        { ...base, job: { prompt: "{{id}}", where: "id > DATE '2024-01-01'" } },
        /^where: Binder Error: it compares BIGINT with DATE \('id' is BIGINT\): compare like with like/,
        "job.where",
      ],
    ];
    for (const [body, message, param] of cases) {
      const r = await post(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.message).toMatch(message);
      if (param !== null) expect(r.body.error.param).toBe(param);
    }
    expect((await openaiClient(svc).batches.list()).data.length).toBe(batchesBefore);
    expect((await post({ ...base, input_file_id: "file-nope", job: { prompt: "{{id}}" } })).status).toBe(404);
    // A spreadsheet's CSV, its fields separated by semicolons, is read as its columns.
    const semicolons = await upload("id;lang;review_text\n1;en;Great\n2;de;Gut\n", "semi.csv");
    const semi = await post({ ...base, input_file_id: semicolons, job: { prompt: "{{review_text}}", where: "lang = 'en'" } });
    expect(semi.status, JSON.stringify(semi.body)).toBe(200);

    const plain = await openaiClient(svc).batches.list();
    const notDataset = plain.data.find((b) => !b.metadata?.dataset_input_file_id);
    if (notDataset) {
      const r = await fetch(`${svc.baseUrl}/v1/batches/${notDataset.id}/table`);
      expect(r.status).toBe(400);
      expect(((await r.json()) as any).error.code).toBe("not_a_dataset_batch");
    }
    const wrong = await fetch(`${svc.baseUrl}/v1/batches/${batchId}/table?format=xlsx`);
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as any).error.message).toMatch(/format must be one of parquet, csv, tsv, jsonl/);
  });

  it("keeps a dataset's own text column beside the answers, named result_, and refuses a clash the job's names make", async () => {
    const input = await upload('id,text\n1,Once upon a time\n2,""\n', "notes.csv");
    const base = { input_file_id: input, endpoint: "/v1/completions", completion_window: "24h" };
    const clash = await post({ ...base, job: { prompt: "{{text}}", result_names: { text: "id" } } });
    expect(clash.status).toBe(400);
    expect(clash.body.error.message).toMatch(/^notes\.csv: job\.result_names\.text: 'id' is an input column the output keeps/);
    // Not the text alone: an empty prompt has no token to begin from on a model whose tokenizer adds none.
    const created = await post({ ...base, job: { prompt: "Note: {{text}}", params: { max_tokens: 2 } } });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    await waitForBatch(svc.baseUrl, created.body.id);
    const rows = (await (await fetch(`${svc.baseUrl}/v1/batches/${created.body.id}/table?format=jsonl`)).text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows.map((r) => [r.id, r.text, r.result_error_code])).toEqual([
      [1, "Once upon a time", null],
      [2, "", null],
    ]);
    expect(typeof rows[0].result_text).toBe("string");
  });

  it("refuses a where that reads the server's state, naming what and why, and tells DuckDB's own errors by kind only", async () => {
    const input = await upload(REVIEWS, "reviews.csv");
    const base = { input_file_id: input, endpoint: "/v1/chat/completions", completion_window: "24h" };
    const batchesBefore = (await openaiClient(svc).batches.list()).data.length;
    const probes: Array<[string, string]> = [
      ["current_setting('temp_directory') LIKE '/%'", "current_setting() reads state beyond the row"],
      ["\"VERSION\" /* */ () LIKE 'v1.5%'", "version() reads state beyond the row"],
      ["main.current_setting('home_directory') <> ''", "current_setting() reads state beyond the row"],
      ["lang = 'en' AND (SELECT count(*) FROM duckdb_settings()) > 0", "a subquery (SELECT ..., EXISTS, IN (SELECT ...)) reads beyond"],
      ["length(read_text('/etc/passwd')) > 0", "read_text() reads beyond the row"],
      ["random() < 0.5", "random() gives another value each time the table is read"],
    ];
    for (const [where, said] of probes) {
      const r = await post({ ...base, job: { prompt: "{{id}}", where } });
      expect(r.status, where).toBe(400);
      expect(r.body.error, where).toMatchObject({ type: "invalid_request_error", code: "invalid_dataset", param: "job.where" });
      expect(r.body.error.message, where).toContain(`where: ${said}`);
      expect(JSON.stringify(r.body), where).not.toMatch(/scratch|dataset-|v1\.\d|\/home|\/root/);
    }
    expect((await openaiClient(svc).batches.list()).data.length).toBe(batchesBefore);
    // An error DuckDB raises over the rows is told by kind and types; its text, which quotes the row, goes to the log.
    const logsBefore = logs.length;
    const r = await post({ ...base, job: { prompt: "{{id}}", where: "review_text::INT = 1" } });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ param: "job.where" });
    expect(r.body.error.message).toMatch(
      /^where: Conversion Error: a text could not be read as INTEGER \('review_text' is VARCHAR\): compare like with like, casting one side/,
    );
    expect(r.body.error.message).not.toMatch(/Great/);
    const logged = logs.slice(logsBefore).filter((l) => l.includes("a dataset's where was refused"));
    expect(logged).toHaveLength(1);
    expect(JSON.parse(logged[0]).duckdb).toMatch(/Could not convert string 'Great, "really"\./);
  });

  it("runs so many dataset reads at once and answers a flood of them 429 with a Retry-After", { timeout: 180_000 }, async () => {
    const input = await upload(REVIEWS, "reviews.csv");
    // A where that keeps DuckDB busy a few tenths of a second and keeps no row: each create is a 400, and creates
    // nothing. The fourteen arrive together, so the first reads are still running when the last come. Ten reads two
    // at a time on a loaded 2-core machine took over 60 s with a where eight times as costly.
    const job = { prompt: "{{id}}", where: "levenshtein(repeat(review_text, 500), repeat(lang, 1000)) < 0" };
    const body = { input_file_id: input, endpoint: "/v1/chat/completions", completion_window: "24h", job };
    const answers = await Promise.all(
      Array.from({ length: 14 }, () =>
        fetch(`${svc.baseUrl}/v1/dataset_batches`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        }),
      ),
    );
    const statuses = answers.map((a) => a.status);
    // DATASET_READS=2: two run and eight wait their turn, so ten are read; the rest (four, unless a read ended
    // before the last arrived) are refused.
    expect(statuses.filter((x) => x === 400).length).toBeGreaterThanOrEqual(10);
    expect(statuses.filter((x) => x === 429).length).toBeGreaterThanOrEqual(1);
    expect(statuses.every((x) => x === 400 || x === 429)).toBe(true);
    const refused = answers.find((a) => a.status === 429)!;
    expect(refused.headers.get("retry-after")).toBe("10");
    expect(((await refused.json()) as any).error).toMatchObject({ code: "resource_unavailable", type: "rate_limit_error" });
    const kept = answers.find((a) => a.status === 400)!;
    expect(((await kept.json()) as any).error.message).toMatch(/no rows match the where/);
  });

  it("joins a retry batch's answers over the original's: its table has every row, each with its latest answer", async () => {
    const long = "word ".repeat(900);
    const input = await upload(`id,t\n1,short one\n2,${long}\n3,short three\n`, "mixed.csv");
    const created = await post({
      input_file_id: input,
      endpoint: "/v1/completions",
      completion_window: "24h",
      job: { prompt: "{{t}}", params: { max_tokens: 2 } },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const first = await waitForBatch(svc.baseUrl, created.body.id);
    expect(first.request_counts).toMatchObject({ completed: 2, failed: 1 });
    const retry = (await (
      await fetch(`${svc.baseUrl}/v1/batches/${first.id}/retry`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      })
    ).json()) as any;
    expect(retry.id, JSON.stringify(retry)).toMatch(/^batch_/);
    const second = await waitForBatch(svc.baseUrl, retry.id);
    expect(second.request_counts.total).toBe(1);
    const rows = (await (await fetch(`${svc.baseUrl}/v1/batches/${second.id}/table?format=jsonl`)).text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows.map((r) => [r.id, r.error_code === null])).toEqual([
      [1, true],
      [2, false],
      [3, true],
    ]);
  });

  it("refuses the table of a batch still running", async () => {
    const input = await upload(`q\n${Array.from({ length: 200 }, (_, i) => `line ${i}`).join("\n")}\n`, "many.csv");
    const created = await post({
      input_file_id: input,
      endpoint: "/v1/completions",
      completion_window: "24h",
      job: { prompt: "{{q}}", params: { max_tokens: 64 } },
    });
    const r = await fetch(`${svc.baseUrl}/v1/batches/${created.body.id}/table`);
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.code).toBe("batch_not_finished");
    await openaiClient(svc).batches.cancel(created.body.id);
    await waitForBatch(svc.baseUrl, created.body.id);
    // A cancelled batch's table still has every row: the unrun ones carry batch_cancelled.
    const rows = (await (await fetch(`${svc.baseUrl}/v1/batches/${created.body.id}/table?format=jsonl`)).text()).trim().split("\n");
    expect(rows).toHaveLength(200);
    expect(rows.map((l) => JSON.parse(l).q)).toEqual(Array.from({ length: 200 }, (_, i) => `line ${i}`));

    // Its dataset file deleted, its table cannot be joined: said so, with where its answers still are.
    await openaiClient(svc).files.delete(input);
    const gone = await fetch(`${svc.baseUrl}/v1/batches/${created.body.id}/table`);
    expect(gone.status).toBe(400);
    const error = ((await gone.json()) as any).error;
    expect(error).toMatchObject({ code: "input_gone", param: null });
    expect(error.message).toMatch(/can no longer be joined back into its table: its dataset file has been deleted or has expired/);
  });

  it.skipIf(!haveChromium)("downloads the table from the console's batch page, on a desktop and a phone", async () => {
    mkdirSync(SHOTS, { recursive: true });
    const browser = await launchChromium();
    try {
      for (const width of [1280, 390]) {
        const page = await browser.newPage({ viewport: { width, height: 900 }, acceptDownloads: true });
        await page.goto(`${svc.baseUrl}/#batch/${batchId}`);
        await page.waitForSelector("#b-table:not(.hidden) #b-dl-table:not([disabled])", { timeout: 15_000 });
        await page.selectOption("#b-table-format", "csv");
        const [download] = await Promise.all([page.waitForEvent("download"), page.click("#b-dl-table")]);
        expect(download.suggestedFilename()).toBe(`${batchId}.csv`);
        const text = readFileSync(await download.path(), "utf8");
        expect(text.split("\n")[0]).toMatch(/^id,review_text,text,/);
        expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
        await page.screenshot({ path: path.join(SHOTS, `console-dataset-${width}.png`) });
        await page.close();
      }
    } finally {
      await browser.close();
    }
  });
});
