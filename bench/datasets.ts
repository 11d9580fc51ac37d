// Dataset jobs against batch files: the same rows as a Parquet table through a dataset job and as request JSONL
// through the runner, each a runner process of its own, in turn; then the dataset job's peak memory over growing
// row counts. Embeddings keep each row short, so what is timed is the table's way in and out, not generation.
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { repoRoot } from "../testkit/repo-root.js";
import { readMemory } from "./proc-stats.js";

export interface DatasetRun {
  rows: number;
  form: "dataset" | "jsonl";
  seconds: number;
  rowsPerSecond: number;
  peakRssMiB: number;
  /** The engine's run as the runner's summary gives it (rows over its req/s); the rest of `seconds` is the run's own work. */
  engineSeconds: number;
}

export interface DatasetsResult {
  model: string;
  rows: number;
  pairs: Array<{ dataset: DatasetRun; jsonl: DatasetRun; ratio: number }>;
  /** Median of the pairs' dataset ÷ JSONL rows per second (1 = as fast). */
  ratio: number;
  memory: DatasetRun[];
  /** Peak RSS at the most rows less at the fewest, MiB. */
  memoryGrowthMiB: number;
}

const SQL_ROWS = (n: number) => `SELECT i AS id, 'Document ' || i || ' on topic ' || (i % 97) AS body FROM range(${n}) t(i)`;

/** The rows as a Parquet table, and the same requests as the batch file a user would otherwise write. */
async function writeInputs(dir: string, rows: number): Promise<{ parquet: string; jsonl: string }> {
  const parquet = path.join(dir, `rows-${rows}.parquet`);
  const jsonl = path.join(dir, `rows-${rows}.jsonl`);
  const db = await DuckDBInstance.create(":memory:");
  const c = await db.connect();
  await c.run(`COPY (${SQL_ROWS(rows)}) TO '${parquet}' (FORMAT parquet)`);
  await c.run(
    `COPY (SELECT 'row-' || id AS custom_id, 'POST' AS method, '/v1/embeddings' AS url, {'input': body} AS body FROM '${parquet}') TO '${jsonl}' (FORMAT json)`,
  );
  c.closeSync();
  db.closeSync();
  return { parquet, jsonl };
}

/** One runner process: its wall time and its peak RSS (VmHWM, sampled until it exits). */
function runRunner(argv: string[], env: Record<string, string>): Promise<{ seconds: number; peakRssMiB: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, ["--expose-gc", "--import", "tsx", path.join(repoRoot, "runner/main.ts"), ...argv], {
      cwd: repoRoot,
      // The result cache off: each round runs the same rows, and would otherwise time the cache's answers.
      env: { ...process.env, LOG_LEVEL: "warn", RESULT_CACHE: "off", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    child.stdout.on("data", (d) => (stdout += d));
    let stderr = "";
    child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-2000)));
    let peak = 0;
    const sample = setInterval(() => {
      const m = child.pid ? readMemory(child.pid) : undefined;
      if (m && Number.isFinite(m.peak)) peak = Math.max(peak, m.peak);
    }, 100);
    child.on("exit", (code) => {
      clearInterval(sample);
      if (code !== 0) reject(new Error(`runner exited ${code}: ${stderr}`));
      else resolve({ seconds: (performance.now() - started) / 1000, peakRssMiB: peak / 2 ** 20, stdout });
    });
  });
}

async function timed(
  form: "dataset" | "jsonl",
  rows: number,
  inputs: { parquet: string; jsonl: string },
  dir: string,
  env: Record<string, string>,
) {
  const argv =
    form === "dataset"
      ? [
          "-i",
          inputs.parquet,
          "-o",
          path.join(dir, `out-${rows}.parquet`),
          "--endpoint",
          "/v1/embeddings",
          "--prompt",
          "{{body}}",
          "--overwrite",
        ]
      : ["-i", inputs.jsonl, "-o", path.join(dir, `out-${rows}.jsonl`), "--overwrite"];
  const { stdout, ...r } = await runRunner(argv, env);
  const rate = Number(/this run: \d+ requests in [^,]+, ([\d.]+) req\/s/.exec(stdout)?.[1] ?? Number.NaN);
  return { rows, form, ...r, rowsPerSecond: rows / r.seconds, engineSeconds: rows / rate };
}

export async function compareDatasets(
  model: { name: string; path: string },
  plan: { rows: number; pairs: number; memoryRows: number[] },
  log: (line: string) => void,
): Promise<DatasetsResult> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "obi-bench-datasets-"));
  const env = { MODEL_PATH: model.path, THREADS: "1", MAX_REQUESTS_PER_BATCH: String(Math.max(plan.rows, ...plan.memoryRows)) };
  try {
    log(
      `\ndatasets: ${plan.rows} rows of Parquet through a dataset job against the same lines as request JSONL (${model.name}, embeddings)`,
    );
    const inputs = await writeInputs(dir, plan.rows);
    const pairs: DatasetsResult["pairs"] = [];
    for (let i = 0; i < plan.pairs; i++) {
      const jsonl = await timed("jsonl", plan.rows, inputs, dir, env);
      const dataset = await timed("dataset", plan.rows, inputs, dir, env);
      const ratio = dataset.rowsPerSecond / jsonl.rowsPerSecond;
      pairs.push({ dataset, jsonl, ratio });
      const outside = (r: DatasetRun) => (r.seconds - r.engineSeconds).toFixed(1);
      log(
        `  pair ${i + 1}: JSONL ${jsonl.seconds.toFixed(1)} s (${jsonl.rowsPerSecond.toFixed(0)} rows/s; ${outside(jsonl)} s outside the engine's run), ` +
          `dataset ${dataset.seconds.toFixed(1)} s (${dataset.rowsPerSecond.toFixed(0)} rows/s; ${outside(dataset)} s outside): ${ratio.toFixed(3)}`,
      );
    }
    const sorted = pairs.map((p) => p.ratio).sort((a, b) => a - b);
    const ratio = sorted[Math.floor((sorted.length - 1) / 2)];
    const memory: DatasetRun[] = [];
    for (const rows of plan.memoryRows) {
      const run = rows === plan.rows ? pairs[0].dataset : await timed("dataset", rows, await writeInputs(dir, rows), dir, env);
      memory.push(run);
      log(`  ${rows} rows: peak RSS ${run.peakRssMiB.toFixed(0)} MiB, ${run.seconds.toFixed(1)} s`);
    }
    const growth = memory.at(-1)!.peakRssMiB - memory[0].peakRssMiB;
    log(`  dataset / JSONL rows per second: ${ratio.toFixed(3)} (median of ${pairs.length}); peak RSS growth ${growth.toFixed(0)} MiB`);
    return { model: model.name, rows: plan.rows, pairs, ratio, memory, memoryGrowthMiB: growth };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
