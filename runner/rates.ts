// The runner's measured throughput, per model, in BATCH_DIR/runner-rates.json: each run that computed for a couple of
// seconds or more records the work it computed (generated tokens, plus prompt tokens evaluated at their weight, as a
// plan counts them: pipeline/plan.ts) over the seconds its lines ran (the model's load not included). A plan
// (`--plan`, a dataset job's `--dry-run`) projects at the rate of the model's last runs, as the server's plan does
// from its finished batches; before any, at the default rate.
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { DEFAULT_WORK_PER_SECOND } from "../batches/plan.js";
import type { TokenUsage } from "../openai/backend.js";
import { PROMPT_TOKEN_WEIGHT } from "../pipeline/plan.js";
import type { CachedWork, Progress } from "../pipeline/types.js";

const FILE = "runner-rates.json";
/** The runs a model's rate is measured over, newest last. */
const KEPT_RUNS = 20;
/** A run shorter than this says little about a rate. */
const MIN_SECONDS = 2;

interface RunRate {
  work: number;
  seconds: number;
}
type Rates = Record<string, RunRate[]>;

async function read(batchDir: string): Promise<Rates> {
  try {
    const parsed = JSON.parse(await readFile(path.join(batchDir, FILE), "utf8")) as unknown;
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Rates) : {};
  } catch {
    // None yet, or torn: the default rate until a run records one.
    return {};
  }
}

/** The work a run computed: what the result cache and prefix reuse answered is not counted. */
export function computedWork(usage: TokenUsage, cached: CachedWork | undefined): number {
  const generated = usage.completionTokens - (cached?.outputTokens ?? 0);
  return Math.max(0, generated) + Math.max(0, usage.promptTokens - usage.cachedTokens) * PROMPT_TOKEN_WEIGHT;
}

/** What this run computed: its result's work less what the run it resumed had done. */
export function runWork(result: Progress, base: Progress | undefined): number {
  const of = (p: Progress) => computedWork(p.usage, p.cached);
  return Math.max(0, of(result) - (base ? of(base) : 0));
}

/** Records a run's rate (none for a run too short or that computed nothing). */
export async function recordRate(batchDir: string, model: string, work: number, seconds: number): Promise<void> {
  if (seconds < MIN_SECONDS || work <= 0) return;
  const rates = await read(batchDir);
  const runs = Array.isArray(rates[model]) ? rates[model] : [];
  rates[model] = [...runs, { work, seconds }].slice(-KEPT_RUNS);
  await mkdir(batchDir, { recursive: true });
  const tmp = path.join(batchDir, `${FILE}.${process.pid}.tmp`);
  await writeFile(tmp, `${JSON.stringify(rates)}\n`);
  await rename(tmp, path.join(batchDir, FILE));
}

/** The model's rate over its recorded runs, else the default. */
export async function measuredRunnerRate(batchDir: string, model: string): Promise<{ workPerSecond: number; runs: number }> {
  const runs = (await read(batchDir))[model];
  const valid = Array.isArray(runs) ? runs.filter((r) => r && r.work > 0 && r.seconds >= MIN_SECONDS) : [];
  const work = valid.reduce((a, r) => a + r.work, 0);
  const seconds = valid.reduce((a, r) => a + r.seconds, 0);
  return valid.length > 0 ? { workPerSecond: work / seconds, runs: valid.length } : { workPerSecond: DEFAULT_WORK_PER_SECOND, runs: 0 };
}
