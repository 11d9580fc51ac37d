// The runner's plan of a batch file (`--plan`): validated as a run validates it, its lines counted by the model's
// own tokenizer (the model is loaded; no request runs), the lines BATCH_DIR's result cache would answer counted as
// cached, and its time projected at the model's rate over its last runs here (runner/rates.ts), with no queue ahead.
import { mkdtemp, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type pino from "pino";
import { createRouter, loadRegistry } from "../backends/build.js";
import { planCost } from "../batches/plan.js";
import { openEmbeddedCache } from "../cache/open.js";
import type { Config } from "../config/config.js";
import type { BatchPlan } from "../domain/batch-plan.js";
import { planFile } from "../pipeline/plan.js";
import type { Endpoint } from "../pipeline/types.js";
import { validateBatchFile } from "../pipeline/validate.js";
import { measuredRunnerRate } from "./rates.js";
import { download, isUrl } from "./remote.js";
import { detectEndpoint, InputError, InvalidFileError, ModelNotServedError, RUNNER_SCOPE } from "./run-file.js";

/** A runner's plan: the API's, without a completion window (an offline run has no deadline). */
export type RunPlan = Omit<BatchPlan, "deadline_at_risk" | "queue_ahead">;

export interface PlanFileOptions {
  /** A local path or an http(s) URL (downloaded first). */
  input: string;
  config: Config;
  logger: pino.Logger;
  signal?: AbortSignal;
  modelHint?: { hint?: string; setting?: string };
}

/** The plan of a batch file; InputError for a file a run would refuse (nothing is run either way). */
export async function planRunFile(o: PlanFileOptions): Promise<RunPlan> {
  // A folder only for a file at a URL: a plan of a local file leaves nothing behind even when it is killed.
  const work = isUrl(o.input) ? await mkdtemp(path.join(os.tmpdir(), "obi-plan-")) : undefined;
  try {
    const file = work ? path.join(work, "input.jsonl") : o.input;
    if (work) await download(o.input, file, { signal: o.signal });
    else if (!(await stat(file).catch(() => null))?.isFile()) throw new InputError(`no such input file: ${file}`);
    return await planLocal(file, await detectEndpoint(file, o.config.maxLineBytes), o);
  } finally {
    if (work) await rm(work, { recursive: true, force: true });
  }
}

/** The plan of a local batch file of `endpoint`'s lines. */
export async function planLocal(file: string, endpoint: Endpoint, o: Omit<PlanFileOptions, "input">): Promise<RunPlan> {
  const validation = await validateBatchFile(file, endpoint, {
    maxRequests: o.config.maxRequestsPerBatch,
    maxLineBytes: o.config.maxLineBytes,
  });
  if (!validation.ok) throw new InvalidFileError(validation);
  const registry = await loadRegistry(o.config, o.logger, { ...o.modelHint, signal: o.signal });
  const spec = registry.resolve(validation.model);
  if (!spec) throw new ModelNotServedError(validation.model, registry.names);
  // The answers a run would read are the runner's in BATCH_DIR's cache: the plan counts them as cached lines.
  const results = o.config.resultCache.enabled
    ? await openEmbeddedCache(o.config.batchDir, o.config.resultCache).catch(() => undefined)
    : undefined;
  const router = await createRouter(o.config, registry, o.logger, process.env, results);
  try {
    const lease = await router.acquire(spec.name, o.signal);
    const backend = lease.backend;
    const counts = await planFile(file, {
      endpoint,
      backendFor: () => backend,
      countTokens: backend.countTokens && ((_, text) => backend.countTokens!(text)),
      cache: { on: results !== undefined, scope: RUNNER_SCOPE },
      maxLineBytes: o.config.maxLineBytes,
    });
    lease.release();
    const rate = await measuredRunnerRate(o.config.batchDir, spec.name);
    const own = counts.work / rate.workPerSecond;
    const seconds = Math.ceil(own);
    const { work: _, cached_input_tokens: __, cached_output_tokens: ___, model: ____, ...shown } = counts;
    return {
      object: "batch.plan",
      model: spec.name,
      ...shown,
      projected_seconds: seconds,
      projected_finish_at: Math.floor(Date.now() / 1000) + seconds,
      throughput: { work_per_second: Math.round(rate.workPerSecond * 100) / 100, measured_batches: rate.runs },
      projected_cost: spec.price ? planCost(spec.price, counts, own) : null,
    };
  } finally {
    await router.close();
    await results?.cache.close();
  }
}

/** The plan as the runner prints it: a few lines a person reads, then the JSON. */
export function formatPlan(plan: RunPlan): string {
  const n = (x: number) => x.toLocaleString("en-US");
  const cost = plan.projected_cost ? `, about ${plan.projected_cost.amount} ${plan.projected_cost.currency}` : "";
  return (
    `plan: ${n(plan.lines)} lines on ${plan.model}, ${n(plan.distinct_requests)} distinct requests, ${n(plan.cached_lines)} cached; ` +
    `${n(plan.input_tokens)} prompt tokens (${plan.tokenizer === "model" ? "the model's tokenizer" : "estimated"}), ` +
    `at most ${n(plan.max_output_tokens)} generated; about ${n(plan.projected_seconds)} s${cost}. Nothing was run.\n` +
    `${JSON.stringify(plan, null, 2)}\n`
  );
}
