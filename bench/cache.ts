// What the result cache is worth and what it costs: a batch whose lines repeat others with collapsing against
// metadata.cache "off"; a batch with no repeats on an empty cache against RESULT_CACHE=off; a dataset job run again
// unchanged and with a few rows changed, each a runner process, against its first run; and the stores alone
// (bench/cache-store.ts): resident memory as the embedded store fills, lookups per second of both stores.
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { ensureBuilt, entryArgs } from "../testkit/entry.js";
import { repoRoot } from "../testkit/repo-root.js";
import { completionLines, writeBatchFile } from "../testkit/workload.js";
import type { CacheStoreResult } from "./cache-store.js";
import { runChild } from "./child.js";
import { type BenchServer, startServer } from "./server.js";
import { type Batch, uploadFile, waitForTimedBatch } from "./timed-batches.js";

export interface CachePlan {
  /** Lines of each timed batch. */
  lines: number;
  /** Share of a batch's lines that repeat another line of it. */
  repeatShare: number;
  maxTokens: number;
  /** max_tokens of the dataset job's requests: short labels. */
  jobMaxTokens: number;
  /** Batches of each side of the batch rows, alternating; each side keeps its fastest. */
  rounds: number;
  /** Rows of the dataset job, and the share changed before its third run. */
  rows: number;
  changedShare: number;
  /** Answers the embedded store holds at each resident-memory sample, and lookups timed per store. */
  storeCounts: number[];
  lookups: number;
  /** Answers put in the PostgreSQL store before its lookups. */
  pgEntries: number;
}

export interface CacheRun {
  label: string;
  requests: number;
  generated: number;
  seconds: number;
  /** Lines the batch object counts as answered without running, where it says. */
  cachedLines?: number | null;
}

export interface RunnerRun {
  label: string;
  seconds: number;
  /** The runner's summary line of this run ("this run: N requests in ..."). */
  summary: string;
}

export interface CacheResult {
  model: string;
  plan: CachePlan;
  /** Each side's fastest batch; ratio = off's seconds ÷ on's (above 1: the cache's side is faster). */
  repeats: { on: CacheRun; off: CacheRun; ratio: number };
  noRepeats: { on: CacheRun; off: CacheRun; ratio: number };
  /**
   * The runner compiled, as the image runs it (`node dist/runner/main.js`); `unchangedTsx` the unchanged re-run through
   * tsx, as `npm run batch` runs it in a checkout.
   */
  dataset: { first: RunnerRun; unchanged: RunnerRun; unchangedTsx?: RunnerRun; changed: RunnerRun; reuse: boolean };
  store: CacheStoreResult;
}

/** Line i's prompt, distinct for every (salt, i): no line shares more than its opening words with another. */
const promptOf = (salt: string) => (i: number) =>
  `Note ${salt}-${i}: the ${["red", "blue", "green", "grey"][i % 4]} box holds ${i * 7 + 3} items;`;

/** `lines` greedy completions, the last `repeatShare` of them copies of earlier ones (spread, then shuffled by a fixed stride). */
export function repeatLines(lines: number, repeatShare: number, maxTokens: number, salt: string) {
  const distinct = Math.max(1, Math.round(lines * (1 - repeatShare)));
  const base = completionLines(distinct, { prefix: salt, maxTokens, prompt: promptOf(salt) });
  const all = Array.from({ length: lines }, (_, i) => ({ ...base[i < distinct ? i : (i * 7919) % distinct], custom_id: `${salt}-${i}` }));
  // A fixed permutation (a stride prime to the count), so repeats are spread through the file as in real data.
  let stride = 7;
  while (gcd(stride, lines) !== 1) stride += 2;
  return all.map((_, i) => all[(i * stride) % lines]);
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** One batch through the server as a user sends it, `metadata` given; timed from the upload to the poll that sees it end. */
async function timedBatch(
  server: BenchServer,
  label: string,
  lines: readonly object[],
  metadata?: Record<string, string>,
): Promise<CacheRun> {
  const file = path.join(server.batchDir, `${label.replace(/\W+/g, "-")}.jsonl`);
  await writeBatchFile(file, lines);
  const started = performance.now();
  const fileId = await uploadFile(server.baseUrl, file);
  const res = await fetch(`${server.baseUrl}/v1/batches`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input_file_id: fileId, endpoint: "/v1/completions", completion_window: "24h", metadata }),
  });
  const created = (await res.json()) as Batch;
  if (res.status !== 200) throw new Error(`${label}: the create answered ${res.status}: ${JSON.stringify(created)}`);
  const { batch, seenAt } = await waitForTimedBatch(server.baseUrl, created.id, 25, {
    folder: path.join(server.batchDir, created.id),
    lines: lines.length,
  });
  if (batch.status !== "completed" || batch.request_counts.failed > 0)
    throw new Error(`${label}: the batch ended ${batch.status} with counts ${JSON.stringify(batch.request_counts)}`);
  const b = batch as Batch & { usage?: { output_tokens?: number }; cached_lines?: number };
  return {
    label,
    requests: lines.length,
    generated: b.usage?.output_tokens ?? 0,
    seconds: (seenAt - started) / 1000,
    cachedLines: b.cached_lines ?? null,
  };
}

const fastest = (runs: CacheRun[]) => runs.reduce((a, b) => (b.seconds < a.seconds ? b : a));

/**
 * `rounds` runs of each side, in the order off, on, then on, off, and so on (a machine whose load drifts favours
 * neither side); each side keeps its fastest. `off` is the baseline side, `on` the cache's; ratio = off ÷ on.
 */
async function paired(
  rounds: number,
  log: (line: string) => void,
  name: string,
  side: { first: (round: number) => Promise<CacheRun>; second: (round: number) => Promise<CacheRun> },
): Promise<{ on: CacheRun; off: CacheRun; ratio: number }> {
  const offRuns: CacheRun[] = [];
  const onRuns: CacheRun[] = [];
  for (let r = 0; r < rounds; r++) {
    if (r % 2 === 0) {
      offRuns.push(await side.first(r));
      onRuns.push(await side.second(r));
    } else {
      onRuns.push(await side.second(r));
      offRuns.push(await side.first(r));
    }
  }
  const [on, off] = [fastest(onRuns), fastest(offRuns)];
  const secs = (runs: CacheRun[]) => runs.map((x) => x.seconds.toFixed(2)).join(", ");
  log(`  ${name}: ${off.label} ${secs(offRuns)} s; ${on.label} ${secs(onRuns)} s: ${(off.seconds / on.seconds).toFixed(3)}x`);
  return { on, off, ratio: off.seconds / on.seconds };
}

/** A fresh server (a fresh BATCH_DIR, so an empty cache) warmed by a 4-line batch that leaves nothing in the cache. */
async function warmServer(modelPath: string, env: Record<string, string>, maxTokens: number): Promise<BenchServer> {
  // The cache on, as a user's server has it, unless `env` turns it off (startServer's default is off).
  const server = await startServer(modelPath, { RESULT_CACHE: "on", ...env });
  await timedBatch(server, "warm-up", repeatLines(4, 0, maxTokens, "warm"), { cache: "off" }).catch(async (err) => {
    await server.stop();
    throw err;
  });
  return server;
}

/** One batch on a server of its own, started for it and stopped after. */
async function aloneOn(modelPath: string, env: Record<string, string>, plan: CachePlan, label: string, salt: string): Promise<CacheRun> {
  const server = await warmServer(modelPath, env, plan.maxTokens);
  try {
    return await timedBatch(server, label, repeatLines(plan.lines, 0, plan.maxTokens, salt));
  } finally {
    await server.stop();
  }
}

/**
 * The batch rows. Repeats: both sides on one server at its defaults, metadata.cache "off" on the baseline's batches.
 * No repeats: each batch on a fresh server, so the cache's side starts empty, the other with RESULT_CACHE=off.
 */
async function batchRows(modelPath: string, plan: CachePlan, log: (line: string) => void) {
  const share = `${plan.repeatShare * 100}% repeats`;
  const lines = (salt: string) => repeatLines(plan.lines, plan.repeatShare, plan.maxTokens, salt);
  const on = await warmServer(modelPath, {}, plan.maxTokens);
  // Each batch's text is its own (its salt), so no batch finds another's answers in the store.
  const repeats = await paired(plan.rounds, log, "repeats", {
    first: (r) => timedBatch(on, `${plan.lines} lines, ${share}, metadata.cache off`, lines(`r${r}off`), { cache: "off" }),
    second: (r) => timedBatch(on, `${plan.lines} lines, ${share}, collapsed`, lines(`r${r}on`)),
  }).finally(() => on.stop());
  const noRepeats = await paired(plan.rounds, log, "no repeats", {
    first: (r) => aloneOn(modelPath, { RESULT_CACHE: "off" }, plan, `${plan.lines} lines, no repeats, RESULT_CACHE=off`, `d${r}off`),
    second: (r) => aloneOn(modelPath, {}, plan, `${plan.lines} lines, no repeats, empty cache`, `d${r}on`),
  });
  return { repeats, noRepeats };
}

/** The bench's environment without the cache's settings, which would otherwise decide the runs' sides. */
const ownEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RESULT_CACHE")));

/** How a runner process is started: compiled (testkit/entry.ts's build, as the image runs it) or through tsx. */
type Via = "compiled" | "tsx";

const runnerArgs = (via: Via) =>
  via === "compiled"
    ? entryArgs("runner/main.ts", ["--expose-gc"])
    : ["--expose-gc", "--import", "tsx", path.join(repoRoot, "runner/main.ts")];

/** One runner process: its wall time and what it printed. */
function runRunner(argv: string[], env: Record<string, string>, via: Via): Promise<{ seconds: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, [...runnerArgs(via), ...argv], {
      cwd: repoRoot,
      env: { ...ownEnv(), LOG_LEVEL: "warn", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-2000)));
    child.on("exit", (code) => {
      if (code !== 0) reject(new Error(`runner exited ${code}: ${stderr}`));
      else resolve({ seconds: (performance.now() - started) / 1000, stdout });
    });
  });
}

/** The job's table: `rows` short texts, those whose index falls in the changed share given other words. */
async function writeTable(file: string, rows: number, changedEvery: number): Promise<void> {
  const db = await DuckDBInstance.create(":memory:");
  const c = await db.connect();
  const changed = changedEvery > 0 ? `CASE WHEN i % ${changedEvery} = 0 THEN ' (revised)' ELSE '' END` : "''";
  await c.run(
    `COPY (SELECT i AS id, 'Ticket ' || i || ' about order ' || (i * 31 % 9973) || ${changed} AS body FROM range(${rows}) t(i)) TO '${file}' (FORMAT parquet)`,
  );
  c.closeSync();
  db.closeSync();
}

/** The dataset job in one folder: first, again unchanged (three times), again with a share of its rows changed. */
async function datasetRows(modelPath: string, plan: CachePlan, log: (line: string) => void): Promise<CacheResult["dataset"]> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "obi-bench-cache-job-"));
  const input = path.join(dir, "tickets.parquet");
  const env = { MODEL_PATH: modelPath, BATCH_DIR: path.join(dir, "batches"), MAX_REQUESTS_PER_BATCH: String(plan.rows) };
  const params = JSON.stringify({ max_tokens: plan.jobMaxTokens, temperature: 0 });
  const argv = ["-i", input, "-o", path.join(dir, "labels.parquet"), "--endpoint", "/v1/completions"];
  argv.push("--prompt", "Label this ticket: {{body}}", "--params", params, "--overwrite");
  const run = async (label: string, via: Via = "compiled"): Promise<RunnerRun> => {
    const r = await runRunner(argv, env, via);
    const summary = /this run: [^\n]*?\)?$/m.exec(r.stdout)?.[0].replace(/\)$/, "") ?? r.stdout.trim().split("\n").at(-1) ?? "";
    log(`  ${label}: ${r.seconds.toFixed(2)} s (${summary})`);
    return { label, seconds: r.seconds, summary };
  };
  try {
    await ensureBuilt();
    await writeTable(input, plan.rows, 0);
    const first = await run(`${plan.rows} rows, first run`);
    // A re-run lasts about two seconds, which one busy moment of the machine moves by a tenth: the median of three.
    const reruns: RunnerRun[] = [];
    for (let i = 1; i <= 3; i++) reruns.push(await run(`${plan.rows} rows, run again unchanged (${i} of 3)`));
    const unchanged = reruns.sort((a, b) => a.seconds - b.seconds)[1];
    const unchangedTsx = await run(`${plan.rows} rows, run again unchanged, through tsx`, "tsx");
    await writeTable(input, plan.rows, Math.round(1 / plan.changedShare));
    const changed = await run(`${plan.rows} rows, ${plan.changedShare * 100}% of them changed`);
    // A re-run that took half the first run's time or more computed its rows again: the runner reused nothing.
    return { first, unchanged, unchangedTsx, changed, reuse: unchanged.seconds < first.seconds / 2 };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function measureCache(
  model: { name: string; path: string },
  plan: CachePlan,
  log: (line: string) => void,
): Promise<CacheResult> {
  log(
    `\ncache on ${model.name}: ${plan.lines}-line batches, a ${plan.rows}-row dataset job, the stores up to ${plan.storeCounts.at(-1)} answers`,
  );
  const { repeats, noRepeats } = await batchRows(model.path, plan, log);
  const dataset = await datasetRows(model.path, plan, log);
  const store = await runChild<CacheStoreResult>("cache-store.ts", {
    counts: plan.storeCounts.join(","),
    lookups: plan.lookups,
    "pg-entries": plan.pgEntries,
  });
  for (const r of store.rss) log(`  store: ${r.entries} answers, RSS ${r.rssMiB.toFixed(0)} MiB (heap ${r.heapMiB.toFixed(0)} MiB)`);
  for (const l of store.lookups) log(`  ${l.store}: ${l.perSecond.toFixed(0)} lookups/s over ${l.entries} answers`);
  return { model: model.name, plan, repeats, noRepeats, dataset, store };
}
