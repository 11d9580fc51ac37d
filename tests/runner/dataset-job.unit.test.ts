// Dataset jobs through the runner up to the point a model would load: the job's errors (its flags checked as a job
// file's fields are), and --dry-run's preview. Nothing here loads a model or runs a request.
import { readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import pino from "pino";
import { beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../config/config.js";
import { parseRunnerArgs } from "../../runner/args.js";
import { runDataset } from "../../runner/run-dataset.js";
import { withArgs } from "../../runner/run-offline.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("dataset-job-unit");
let dir: string;

beforeAll(async () => {
  dir = path.dirname(await scratch.write("", "keep"));
});

/** The runner as `npm run batch -- <argv>` runs it in `dir`, with its output captured. */
async function batch(...argv: string[]) {
  const parsed = parseRunnerArgs(argv, dir);
  if (parsed.kind !== "dataset") throw new Error(JSON.stringify(parsed));
  let stdout = "";
  let stderr = "";
  const code = await runDataset(parsed.args, {
    config: withArgs(loadConfig({}), parsed.args.engine),
    logger: pino({ level: "silent" }),
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
  });
  return { code, stdout, stderr };
}

describe("a dataset job's errors", () => {
  it("refuses a bad flag as the job's error, naming the flag, before any row is read", async () => {
    writeFileSync(path.join(dir, "q.csv"), "q\nhello\n");
    const cases: Array<[string[], RegExp]> = [
      [["--endpoint", "/v1/foo"], /^error: --endpoint: must be one of \/v1\/responses, \/v1\/chat\/completions, .*\/v1\/score$/],
      [["--endpoint", "/v1/chat/completions/"], /^error: --endpoint: must be one of /],
      [["--messages", '{"role":"user"}'], /^error: --messages: /],
      [["--params", "[1]"], /^error: --params: /],
      [["--keep", ""], /^error: --keep: /],
    ];
    for (const [flags, message] of cases) {
      const r = await batch("-i", "q.csv", "-o", "q-out.parquet", ...(flags[0] === "--messages" ? [] : ["--prompt", "{{q}}"]), ...flags);
      expect(r, flags.join(" ")).toMatchObject({ code: 2, stdout: "" });
      expect(r.stderr.trim(), flags.join(" ")).toMatch(message);
      expect(r.stderr, flags.join(" ")).not.toMatch(/row 1/);
    }
  });

  it("refuses an output format it cannot write before anything runs, not after", async () => {
    writeFileSync(path.join(dir, "x.csv"), "q\nhello\n");
    const r = await batch("-i", "x.csv", "-o", "x-out.xlsx", "--prompt", "{{q}}");
    expect(r).toMatchObject({ code: 2, stdout: "" });
    expect(r.stderr.trim()).toBe("error: job: output: unknown output format '.xlsx' (.parquet, .csv, .tsv, .jsonl, .ndjson)");
    expect(readdirSync(dir).filter((f) => f.startsWith("x.") || f.startsWith(".x."))).toEqual(["x.csv"]);
  });

  it("says a Messages job needs a model before any row is read, rather than failing row 1", async () => {
    writeFileSync(path.join(dir, "m.csv"), "q\nhello\n");
    const r = await batch("-i", "m.csv", "-o", "m-out.parquet", "--endpoint", "/v1/messages", "--prompt", "{{q}}");
    expect(r).toMatchObject({ code: 2, stdout: "" });
    expect(r.stderr.trim()).toMatch(/^error: job: model: \/v1\/messages names the model in every request: set model \(--job-model\)$/);
    expect(readdirSync(dir).filter((f) => f.startsWith("m-out"))).toEqual([]);
  });
});

describe("--dry-run", () => {
  it("previews the first three requests compactly, what they share once, and the columns in one vocabulary", async () => {
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
    const r = await batch(
      "-i",
      "dry.csv",
      "-o",
      "dry.parquet",
      "--prompt",
      "Say {{q}}",
      "--response-format",
      JSON.stringify(schema),
      "--params",
      '{"max_tokens":16,"temperature":0}',
      "--dry-run",
    );
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines.length, r.stdout).toBeLessThanOrEqual(20);
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
    expect(lines.slice(8)).toEqual([
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
    expect(readdirSync(dir).sort()).toEqual([...before]);
  });
});
