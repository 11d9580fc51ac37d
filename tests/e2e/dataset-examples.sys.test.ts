// The three dataset examples of docs/datasets.md, run as documented: `npm run batch -- --job ...` here, and with
// --remote against the service started as `npm start` starts it; each output has every row, in order.
import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { entryArgs } from "../../testkit/entry.js";
import { testModelPath } from "../../testkit/model.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { type ServerProcess, startMain } from "../helpers/process.js";
import { readTable } from "../helpers/tables.js";

const exec = promisify(execFile);
const work = mkdtempSync(path.join(os.tmpdir(), "obi-dataset-examples-"));
let server: ServerProcess;
let env: Record<string, string>;

beforeAll(async () => {
  env = { MODEL_PATH: await testModelPath(), THREADS: "1", SEQUENCES: "4", CONTEXT_SIZE: "512" };
  server = await startMain({ ...env, BATCH_DIR: path.join(work, "batches") });
});
afterAll(async () => {
  server?.child.kill("SIGKILL");
  await server?.exited;
  rmSync(work, { recursive: true, force: true });
});

/** `npm run batch -- --job <example> [...more]` on a copy of examples/datasets. */
async function runExample(copy: string, job: string, more: string[] = []) {
  return exec(process.execPath, [...entryArgs("runner/main.ts", ["--expose-gc"]), "--job", path.join(copy, job), ...more], {
    cwd: repoRoot,
    env: { ...process.env, ...env, LOG_LEVEL: "warn" },
  });
}

const rowsOf = async (file: string) => (await readTable(file)).rows;

describe.each([
  ["here", [] as string[]],
  ["with --remote", ["--remote"]],
])("the dataset examples, %s", (_where, flags) => {
  let copy: string;
  beforeAll(() => {
    copy = mkdtempSync(path.join(work, "examples-"));
    cpSync(path.join(repoRoot, "examples/datasets"), copy, { recursive: true });
  });
  const more = () => (flags.length ? [...flags, server.baseUrl] : []);

  it("labels the English reviews with a label and a confidence column", async () => {
    const { stdout } = await runExample(copy, "label-reviews.yaml", more());
    expect(stdout).toMatch(/wrote .*labeled-reviews\.parquet: 5 rows/);
    const rows = await rowsOf(path.join(copy, "labeled-reviews.parquet"));
    expect(rows.map((r) => r.id)).toEqual([1, 2, 4, 5, 6]);
    expect(Object.keys(rows[0])).toEqual(expect.arrayContaining(["review_text", "label", "confidence", "error_code"]));
  }, 120_000);

  it("embeds the Parquet corpus", async () => {
    await runExample(copy, "embed-corpus.yaml", more());
    const rows = await rowsOf(path.join(copy, "embedded-corpus.parquet"));
    expect(rows.map((r) => r.title)).toEqual(["Tides", "Photosynthesis", "Volcanoes", "Rainbows"]);
    expect(rows.every((r) => Array.isArray(r.embedding) && r.error_code === null)).toBe(true);
  }, 120_000);

  it("generates, then judges, in two stages", async () => {
    const { stdout } = await runExample(copy, "generate-then-judge.yaml", more());
    expect(stdout).toMatch(/stage 2 of 2: wrote .*judged\.csv: 3 rows/);
    const rows = await rowsOf(path.join(copy, "judged.csv"));
    expect(rows.map((r) => r.qid)).toEqual(["q1", "q2", "q3"]);
    expect(Object.keys(rows[0])).toEqual(expect.arrayContaining(["question", "text", "score", "reason", "error_code"]));
  }, 180_000);
});
