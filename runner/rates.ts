// The runner's measured throughput, per model, in BATCH_DIR/runner-rates.json: each run that computed for a couple of
// seconds or more, the result cache answering at most a tenth of its lines, records the work it computed (generated tokens, plus prompt tokens evaluated at their weight, as a
// plan counts them: pipeline/plan.ts) over the seconds its lines ran (the model's load not included). A plan
// (`--plan`, a dataset job's `--dry-run`) projects at the rate of the model's last runs, as the server's plan does
// from its finished batches; before any, at the default rate.
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { MEASURED_RUNS, type MeasuredRun, MIN_MEASURED_SECONDS, rateOver } from "../batches/plan.js";
import type { TokenUsage } from "../openai/backend.js";
import { PROMPT_TOKEN_WEIGHT } from "../pipeline/plan.js";
import type { CachedWork, Progress } from "../pipeline/types.js";
import { readJsonFile, writeJsonAtomic } from "../stores/atomic-json.js";

const FILE = "runner-rates.json";
type Rates = Record<string, MeasuredRun[]>;

async function read(batchDir: string): Promise<Rates> {
  try {
    const parsed = await readJsonFile(path.join(batchDir, FILE));
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Rates) : {};
  } catch {
    // Torn: the default rate until a run records one.
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
  if (seconds < MIN_MEASURED_SECONDS || work <= 0) return;
  const rates = await read(batchDir);
  const runs = Array.isArray(rates[model]) ? rates[model] : [];
  rates[model] = [...runs, { work, seconds }].slice(-MEASURED_RUNS);
  await mkdir(batchDir, { recursive: true });
  await writeJsonAtomic(path.join(batchDir, FILE), rates);
}

/** The model's rate over its recorded runs (batches/plan.ts's rule), else the default. */
export async function measuredRunnerRate(batchDir: string, model: string): Promise<{ workPerSecond: number; runs: number }> {
  const runs = (await read(batchDir))[model];
  return rateOver(Array.isArray(runs) ? runs.filter((r) => r && r.work > 0 && Number.isFinite(r.seconds)) : []);
}
