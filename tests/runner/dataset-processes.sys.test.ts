// Dataset jobs across processes: the runner killed with -9 mid-job and run again (every row once, in order), and
// --remote against the service as `npm start` runs it, in the embedded mode and the distributed mode (PostgreSQL
// and S3), where a stopped runner follows its batch again instead of submitting a second one.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../config/config.js";
import { parseRunnerArgs } from "../../runner/args.js";
import { runDataset } from "../../runner/run-dataset.js";
import { withArgs } from "../../runner/run-offline.js";
import { entryArgs } from "../../testkit/entry.js";
import { testModelPath } from "../../testkit/model.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { type SharedState, startChild, startSharedState } from "../helpers/cluster.js";
import type { ServerProcess } from "../helpers/process.js";
import { scratchDir } from "../helpers/scratch.js";
import { serverTestbed } from "../helpers/server-testbed.js";
import { parquetFrom, readTable } from "../helpers/tables.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const scratch = scratchDir("dataset-processes");
// Every row computes: the kills below land while rows generate, which answers remembered by an earlier run would not.
const engineEnv = { THREADS: "1", SEQUENCES: "2", CONTEXT_SIZE: "256", LOG_LEVEL: "warn", RESULT_CACHE: "off" };
let dir: string;

beforeAll(async () => {
  dir = path.dirname(await scratch.write("", "keep"));
});

const jsonlRows = (file: string) =>
  readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));

/** A job's working folder or record beside its output, named after the input and the job's key. */
function placeOf(stem: string, kind: "work" | "record"): string {
  const re = kind === "work" ? new RegExp(`^${stem}\\.[0-9a-f]{12}\\.work$`) : new RegExp(`^\\.${stem}\\.[0-9a-f]{12}\\.json$`);
  const found = readdirSync(dir).find((f) => re.test(f));
  return path.join(dir, found ?? `${stem}.?.${kind}`);
}

function writeStories(name: string, n: number): string {
  const file = path.join(dir, name);
  writeFileSync(file, `id,opening\n${Array.from({ length: n }, (_, i) => `${i},Once upon a time ${i}`).join("\n")}\n`);
  return file;
}

/** The runner in this process, against `remote` or here, stopped when `stop` aborts. */
async function runner(argv: string[], stop?: AbortSignal) {
  const parsed = parseRunnerArgs(argv, dir);
  if (parsed.kind !== "dataset") throw new Error(JSON.stringify(parsed));
  let stdout = "";
  let stderr = "";
  const config = withArgs(loadConfig({ MODEL_PATH: await testModelPath(), ...engineEnv }), parsed.args.engine);
  const code = await runDataset(parsed.args, {
    config,
    logger: pino({ level: "silent" }),
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    ...(stop ? { signal: stop } : {}),
  });
  return { code, stdout, stderr };
}

describe("a dataset job killed with -9", () => {
  it("finishes on the next run with every row exactly once, in input order", async () => {
    const input = writeStories("stories.csv", 60);
    const output = path.join(dir, "stories.jsonl");
    const argv = [...entryArgs("runner/main.ts"), "-i", input, "-o", output];
    const job = ["--endpoint", "/v1/completions", "--prompt", "{{opening}}", "--params", '{"max_tokens":48,"temperature":0}'];
    const child = spawn(process.execPath, [...argv, ...job], {
      cwd: repoRoot,
      env: { ...process.env, ...engineEnv, MODEL_PATH: await testModelPath() },
      stdio: "ignore",
    });
    const exited = new Promise((resolve) => child.on("exit", resolve));
    const partial = () => path.join(placeOf("stories", "work"), "output.jsonl");
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline && (!existsSync(partial()) || readFileSync(partial(), "utf8").split("\n").length < 10)) {
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill("SIGKILL");
    await exited;
    const done = readFileSync(partial(), "utf8").split("\n").length - 1;
    expect(done).toBeGreaterThanOrEqual(9);
    expect(done).toBeLessThan(60);
    expect(existsSync(output)).toBe(false);

    const resumed = readFileSync(partial(), "utf8");
    const again = await runner(["-i", input, "-o", output, ...job, "--keep-work"]);
    expect(again.code, again.stderr).toBe(0);
    const rows = jsonlRows(output);
    expect(rows.map((r) => r.id)).toEqual(Array.from({ length: 60 }, (_, i) => i));
    expect(rows.every((r) => r.error_code === null && typeof r.text === "string")).toBe(true);
    expect(readFileSync(partial(), "utf8").startsWith(resumed.slice(0, resumed.lastIndexOf("\n") + 1))).toBe(true);
    const ids = jsonlRows(partial()).map((l) => l.custom_id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(60);
    expect(readdirSync(dir).filter((f) => f.includes(".tmp"))).toEqual([]);
  }, 180_000);
});

describe("5,000 rows of a Parquet with a text column, nulls, lists and ids past 2^53, killed with -9 mid-run", () => {
  it("resumes to every row once, in order, the input's text kept under its own name and every type intact", async () => {
    const input = await parquetFrom(
      `SELECT 9007199254740993 + i * 1000 AS id, 'Once upon a time ' || i AS text,
         CASE WHEN i % 7 = 0 THEN NULL ELSE 'title ' || i END AS title,
         CASE WHEN i % 11 = 0 THEN NULL ELSE [i, i + 1, NULL] END AS tags,
         CASE WHEN i % 5 = 0 THEN NULL ELSE (i * 0.5)::DOUBLE END AS score
       FROM range(5000) t(i)`,
      path.join(dir, "held.parquet"),
    );
    const output = path.join(dir, "held-out.parquet");
    const job = ["--endpoint", "/v1/completions", "--prompt", "{{text}}", "--params", '{"max_tokens":4,"temperature":0}'];
    const child = spawn(process.execPath, [...entryArgs("runner/main.ts"), "-i", input, "-o", output, ...job], {
      cwd: repoRoot,
      env: { ...process.env, ...engineEnv, MODEL_PATH: await testModelPath() },
      stdio: "ignore",
    });
    const exited = new Promise((resolve) => child.on("exit", resolve));
    const partial = () => path.join(placeOf("held", "work"), "output.jsonl");
    const lines = () => (existsSync(partial()) ? readFileSync(partial(), "utf8").split("\n").length - 1 : 0);
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline && lines() < 500) await new Promise((r) => setTimeout(r, 20));
    child.kill("SIGKILL");
    await exited;
    const done = lines();
    expect(done).toBeGreaterThanOrEqual(500);
    expect(done).toBeLessThan(5000);
    expect(existsSync(output)).toBe(false);

    const again = await runner(["-i", input, "-o", output, ...job, "--keep-work"]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/continuing: \d+ requests already in the output/);
    expect(again.stderr).toMatch(/the input's 'text' is kept under its own name, so the answers' columns are named result_text/);
    const { types, rows } = await readTable(output);
    expect(types).toMatchObject({
      id: "BIGINT",
      text: "VARCHAR",
      title: "VARCHAR",
      tags: "BIGINT[]",
      score: "DOUBLE",
      result_text: "VARCHAR",
      result_error_code: "VARCHAR",
    });
    expect(rows).toHaveLength(5000);
    expect(rows.map((r) => r.id)).toEqual(Array.from({ length: 5000 }, (_, i) => String(9007199254740993n + BigInt(i) * 1000n)));
    for (const [i, r] of rows.entries()) {
      expect(r.text).toBe(`Once upon a time ${i}`);
      expect(r.title).toBe(i % 7 === 0 ? null : `title ${i}`);
      expect(r.tags).toEqual(i % 11 === 0 ? null : [i, i + 1, null]);
      expect(r.score).toBe(i % 5 === 0 ? null : i * 0.5);
      expect(r.result_error_code, JSON.stringify(r)).toBeNull();
      expect(typeof r.result_text).toBe("string");
    }
    const ids = jsonlRows(partial()).map((l) => l.custom_id);
    expect(ids).toHaveLength(5000);
    expect(new Set(ids).size).toBe(5000);
    expect(readdirSync(dir).filter((f) => f.includes(".tmp"))).toEqual([]);
  }, 600_000);
});

/** Runs the same job on `base`: once stopped while it waits, then followed to its end without a second batch. */
async function remoteJob(base: string, tag: string) {
  const input = writeStories(`${tag}.csv`, 12);
  const output = path.join(dir, `${tag}.jsonl`);
  const argv = [
    "-i",
    input,
    "-o",
    output,
    "--remote",
    base,
    "--prompt",
    "{{opening}}",
    "--job-model",
    "m",
    "--params",
    '{"max_tokens":24}',
  ];
  const stop = new AbortController();
  const first = runner(argv, stop.signal);
  // Stopped as soon as the batch is submitted: the batch runs on at the server.
  const state = () => placeOf(tag, "record");
  while (!(existsSync(state()) && readFileSync(state(), "utf8").includes("remoteBatch"))) await new Promise((r) => setTimeout(r, 10));
  stop.abort();
  expect((await first).code).toBe(130);
  const again = await runner(argv);
  expect(again.code, again.stderr).toBe(0);
  expect(again.stderr).toMatch(/following batch_\w+/);
  const rows = jsonlRows(output);
  expect(Object.keys(rows[0])).toEqual([
    "id",
    "opening",
    "text",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "error_code",
    "error_message",
  ]);
  expect(rows.map((r) => r.id)).toEqual(Array.from({ length: 12 }, (_, i) => i));
  expect(rows.every((r) => r.error_code === null && r.completion_tokens > 0)).toBe(true);
  const batches = (await (await fetch(`${base}/v1/batches?limit=100`)).json()) as { data: unknown[] };
  expect(batches.data).toHaveLength(1);
}

describe("--remote against the service", () => {
  const testbed = serverTestbed("dataset-remote");
  const earlyBed = serverTestbed("dataset-remote-early");

  it("runs a job through the Files and Batches API of the embedded service and joins the answers back", async () => {
    const server = await testbed.start({ SEQUENCES: "2" });
    await remoteJob(server.baseUrl, "embedded");
    // A server that answers no Files API: one line, exit 1, no table.
    const refused = path.join(dir, "refused.jsonl");
    const argv = ["-i", writeStories("refused.csv", 2), "-o", refused, "--remote", `${server.baseUrl}/nope`, "--prompt", "{{opening}}"];
    const bad = await runner([...argv, "--api-key", "k"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^error: POST .*\/nope\/files: HTTP 404/m);
    expect(existsSync(refused)).toBe(false);
  }, 120_000);

  it("fills the output while the batch runs, in the order the finished file keeps", async () => {
    // A folder of its own: the first test's server may still hold the testbed's.
    const server = await earlyBed.start({ SEQUENCES: "2" });
    const output = path.join(dir, "early.jsonl");
    const argv = ["-i", writeStories("early.csv", 400), "-o", output, "--remote", server.baseUrl, "--prompt", "{{opening}}", "--keep-work"];
    const job = runner([...argv, "--params", '{"max_tokens":32}']);
    const partial = () => path.join(placeOf("early", "work"), "output.jsonl");
    let early: string[] = [];
    let settled = false;
    void job.finally(() => (settled = true));
    while (!settled && early.length === 0) {
      const running = (await (await fetch(`${server.baseUrl}/v1/batches?limit=1`)).json()) as { data: Array<{ status: string }> };
      const lines = existsSync(partial()) ? readFileSync(partial(), "utf8").split("\n").filter(Boolean) : [];
      if (running.data[0]?.status === "in_progress" && lines.length > 0) early = lines;
      await new Promise((r) => setTimeout(r, 100));
    }
    const done = await job;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stderr).toMatch(/\d+ results so far in /);
    expect(early.length).toBeGreaterThan(0);
    expect(early.length).toBeLessThan(400);
    const final = readFileSync(partial(), "utf8").split("\n").filter(Boolean);
    expect(final).toHaveLength(400);
    expect(final.slice(0, early.length)).toEqual(early);
    expect(jsonlRows(output).map((r) => r.id)).toEqual(Array.from({ length: 400 }, (_, i) => i));
  }, 180_000);
});

describe.skipIf(!POSTGRES_BIN)("--remote against the distributed mode", () => {
  let shared: SharedState;
  let server: ServerProcess;
  beforeAll(async () => {
    shared = await startSharedState();
    server = await startChild(shared, { SEQUENCES: "2", CONTEXT_SIZE: "512", SHARD_SIZE: "5" });
  }, 120_000);
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    await server?.exited;
    await shared?.close();
  });

  it("runs the same job on PostgreSQL and S3", async () => {
    await remoteJob(server.baseUrl, "distributed");
  }, 120_000);

  it("makes a dataset into a batch and serves its table there too", async () => {
    const form = new FormData();
    form.set("purpose", "batch");
    form.set("file", new Blob([readFileSync(writeStories("routed.csv", 7))]), "routed.csv");
    const file = (await (await fetch(`${server.baseUrl}/v1/files`, { method: "POST", body: form })).json()) as { id: string };
    const job = { prompt: "{{opening}}", params: { max_tokens: 4 } };
    const res = await fetch(`${server.baseUrl}/v1/dataset_batches`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", job }),
    });
    const batch = (await res.json()) as { id: string };
    expect(res.status, JSON.stringify(batch)).toBe(200);
    for (let status = ""; status !== "completed"; await new Promise((r) => setTimeout(r, 200))) {
      status = ((await (await fetch(`${server.baseUrl}/v1/batches/${batch.id}`)).json()) as { status: string }).status;
      expect(["failed", "expired", "cancelled"]).not.toContain(status);
    }
    const rows = (await (await fetch(`${server.baseUrl}/v1/batches/${batch.id}/table?format=jsonl`)).text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows.map((r) => [r.id, r.error_code])).toEqual(Array.from({ length: 7 }, (_, i) => [i, null]));
  }, 120_000);
});
