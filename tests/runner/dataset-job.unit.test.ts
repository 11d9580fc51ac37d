// Dataset jobs through the runner up to the point a model would load: the job's errors (its flags checked as a job
// file's fields are). Nothing here loads a model or runs a request (--dry-run plans with the model: dataset-job.int).
import { readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../config/config.js";
import { datasetCli } from "../helpers/dataset-cli.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("dataset-job-unit");
let dir: string;

beforeAll(async () => {
  dir = path.dirname(await scratch.write("", "keep"));
});

/** The runner as `npm run batch -- <argv>` runs it in `dir`, with its output captured. */
const batch = (...argv: string[]) => datasetCli(dir, loadConfig({}), ...argv);

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
