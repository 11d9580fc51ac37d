// A dataset job guarded against what happens beside it: a second run of the job while one is under way waits for it
// (it would compute every row again and fail at its join), and is refused once it has waited a few seconds; an
// input replaced while the job runs is not joined to answers of the rows it had before.
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { type Config, loadConfig } from "../../config/config.js";
import { checkFlags, planStages } from "../../datasets/job.js";
import { parseRunnerArgs } from "../../runner/args.js";
import { holdStage, stagePlace } from "../../runner/dataset-work.js";
import { testModelPath } from "../../testkit/model.js";
import { datasetRun } from "../helpers/dataset-cli.js";
import { scratchDir, tempDir } from "../helpers/scratch.js";

const scratch = scratchDir("dataset-guards");
const batchDir = tempDir("obi-dataset-batches");
let config: Config;
let dir: string;

beforeAll(async () => {
  // A BATCH_DIR of its own, and so a result cache: a job another run of this file answered is not answered whole.
  config = loadConfig({ MODEL_PATH: await testModelPath(), BATCH_DIR: batchDir, THREADS: "1", SEQUENCES: "4", CONTEXT_SIZE: "256" });
  dir = path.dirname(await scratch.write("", "keep"));
});

/** The runner's dataset form run in `dir`; `onRunning` is told as its requests begin. */
const run = (argv: string[], onRunning?: () => void) => datasetRun(dir, config, argv, onRunning);

const rows = (n: number, word: string) => `id,body\n${Array.from({ length: n }, (_, i) => `${i + 1},${word} ${i + 1}`).join("\n")}\n`;
const job = (input: string, output: string) => [
  "-i",
  input,
  "-o",
  output,
  "--endpoint",
  "/v1/completions",
  "--prompt",
  "Label: {{body}}",
  "--params",
  '{"max_tokens":2,"temperature":0}',
];

describe("a dataset job beside other work", () => {
  it("a run started while another of the job runs waits for it, then computes nothing again", async () => {
    writeFileSync(path.join(dir, "twice.csv"), rows(8, "ticket"));
    let second: Promise<Awaited<ReturnType<typeof run>>> | undefined;
    const first = await run(job("twice.csv", "twice.parquet"), () => {
      second ??= run(job("twice.csv", "twice-too.csv"));
    });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/wrote .*twice\.parquet: 8 rows \(8 answered/);
    const waited = await second!;
    expect(waited.code, waited.stderr).toBe(0);
    expect(waited.stdout).toMatch(/wrote .*twice-too\.csv: 8 rows, joined from .*twice\.parquet \(no row ran again\)/);
  });

  it("refuses a run while another holds the job past the wait, naming the lock", async () => {
    writeFileSync(path.join(dir, "held.csv"), rows(3, "ticket"));
    const parsed = parseRunnerArgs(job("held.csv", "held.parquet"), dir);
    if (parsed.kind !== "dataset") throw new Error("not a dataset job");
    const [stage] = planStages(undefined, dir, checkFlags(parsed.args.flags), dir);
    const release = await holdStage(stagePlace(stage), () => undefined);
    try {
      const r = await run(job("held.csv", "held.parquet"));
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/another run of this job is under way \(it holds .*held\.[0-9a-f]+\.work\.lock\)/);
      expect(existsSync(path.join(dir, "held.parquet"))).toBe(false);
    } finally {
      await release();
    }
  }, 30_000);

  it("does not join answers to an input replaced while the job ran, and says how to go on", async () => {
    const input = path.join(dir, "moving.csv");
    writeFileSync(input, rows(6, "printer"));
    const r = await run(job("moving.csv", "moving.parquet"), () => writeFileSync(input, rows(7, "scanner")));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/moving\.csv: changed while the job ran, so its answers were not joined to it .*--overwrite/);
    expect(existsSync(path.join(dir, "moving.parquet"))).toBe(false);
    const again = await run([...job("moving.csv", "moving.parquet"), "--overwrite"]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/wrote .*moving\.parquet: 7 rows \(7 answered/);
  });
});
