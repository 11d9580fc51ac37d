// A batch's plan before it is created (POST /v1/batches/plan): its file checked as a create checks it (the same
// refusals; a file that would fail validation is a 400 naming its first fault), its lines counted by the model's
// tokenizer and the result cache (pipeline/plan.ts), and its end projected from the model's throughput measured on
// the batches this deployment finished and the queue ahead of it. Nothing is recorded, queued or run.
import { costOf, type Price, roundMoney } from "../backends/price.js";
import type { ModelRegistry } from "../backends/registry.js";
import { checkInputFile, newBatchObject, servedEndpoint } from "../domain/batch-object.js";
import type { BatchPlan } from "../domain/batch-plan.js";
import { parseCompletionWindow } from "../domain/completion-window.js";
import { checkDefaultParams, defaultsFor } from "../domain/default-params.js";
import { InvalidRequestError, NotFoundError } from "../domain/errors.js";
import type { Batch } from "../domain/objects.js";
import type { CreateBatchInput, Owner } from "../domain/ports.js";
import { stopRulesOf } from "../domain/stop-rules.js";
import type { InferenceBackend } from "../openai/backend.js";
import { type PlanCounts, PROMPT_TOKEN_WEIGHT, planFile } from "../pipeline/plan.js";
import type { TokenCounter } from "../pipeline/token-estimate.js";
import { validateBatchFile } from "../pipeline/validate.js";
import type { BatchRecords, FileRecords } from "../state/ports.js";
import type { BlobStore } from "../stores/blob-store.js";
import { checkCacheMetadata } from "./cache-metadata.js";

/**
 * The rate a plan assumes for a model no batch has finished on here yet, in generated-token equivalents per second:
 * a small model's on a few CPU cores. Every finished batch of the model replaces it by what was measured.
 */
export const DEFAULT_WORK_PER_SECOND = 100;
/** The finished batches (or runner runs) a model's rate is measured over, the newest. */
export const MEASURED_RUNS = 20;
/** A run that took less than this says little about a rate (a batch's times are whole seconds). */
export const MIN_MEASURED_SECONDS = 2;

/** A run's work (generated-token equivalents, pipeline/plan.ts) and the seconds it took. */
export interface MeasuredRun {
  work: number;
  seconds: number;
}

/** The rate over runs: their work over their seconds, the runs too short skipped; the default where none is left. */
export function rateOver(runs: readonly MeasuredRun[]): { workPerSecond: number; runs: number } {
  const kept = runs.filter((r) => r.seconds >= MIN_MEASURED_SECONDS && r.work >= 0);
  const work = kept.reduce((a, r) => a + r.work, 0);
  const seconds = kept.reduce((a, r) => a + r.seconds, 0);
  return kept.length > 0 && work > 0
    ? { workPerSecond: work / seconds, runs: kept.length }
    : { workPerSecond: DEFAULT_WORK_PER_SECOND, runs: 0 };
}

export interface PlanDeps {
  files: FileRecords;
  blobs: BlobStore;
  batches: BatchRecords;
  registry: ModelRegistry;
  served?: { forBatch(): Promise<ModelRegistry> };
  limits: { maxRequestsPerBatch: number; maxLineBytes: number };
  /** A model's backend where this process has it up (nothing is loaded for a plan). */
  backendOf?: (model: string) => InferenceBackend | undefined;
  countTokens?: TokenCounter;
  /** RESULT_CACHE: off, no line is cached. */
  cacheOn: boolean;
  /** The scope of a key's answers (the keys file's cache_scope); null: the open API's. */
  cacheScopeOf?: (owner: Owner) => string | null;
  now: () => number;
}

/** The plan of a create's fields: every refusal a create would give, then the counts and projections. */
export async function planBatch(deps: PlanDeps, input: CreateBatchInput): Promise<BatchPlan> {
  const windowSeconds = parseCompletionWindow(input.completion_window);
  stopRulesOf(input.metadata);
  checkCacheMetadata(input.metadata);
  const endpoint = servedEndpoint(input.endpoint);
  const defaults = input.default_params && Object.keys(input.default_params).length > 0 ? input.default_params : undefined;
  if (defaults) checkDefaultParams(endpoint, defaults);
  const file = checkInputFile(await deps.files.keyOf(input.input_file_id, input.owner), input.input_file_id);
  const registry = (await deps.served?.forBatch()) ?? deps.registry;
  const validation = await validateBatchFile(await openInput(deps, file.key, input.input_file_id), endpoint, {
    maxRequests: deps.limits.maxRequestsPerBatch,
    maxLineBytes: deps.limits.maxLineBytes,
    countTokens: deps.countTokens,
  });
  const now = deps.now();
  const batch = newBatchObject({
    id: "batch_plan",
    ...input,
    inputFileId: input.input_file_id,
    created: now,
    windowSeconds,
    validation,
    registry,
  });
  if (batch.status === "failed") throw invalidFile(batch);
  const model = batch.model ?? "";
  const spec = registry.get(model);
  const backend = deps.backendOf?.(model);
  const counts = await planFile(await openInput(deps, file.key, input.input_file_id), {
    endpoint,
    backendFor: () => backend,
    countTokens: deps.countTokens,
    cache: {
      on: deps.cacheOn && input.metadata?.cache !== "off",
      scope: deps.cacheScopeOf?.(input.owner) ?? "open",
    },
    defaults: { ...defaultsFor(endpoint, spec?.defaults), ...defaults },
    maxLineBytes: deps.limits.maxLineBytes,
  });
  const rate = await measuredRate(deps.batches, model);
  const ahead = await queueAhead(deps.batches, model);
  const computed = Math.max(1, counts.distinct_requests - remembered(counts));
  const aheadWork = ahead.lines * (counts.work / computed);
  const own = counts.work / rate.workPerSecond;
  const projected = Math.ceil(aheadWork / rate.workPerSecond + own);
  return {
    object: "batch.plan",
    model,
    ...publicCounts(counts),
    projected_seconds: projected,
    projected_finish_at: now + projected,
    deadline_at_risk: projected > windowSeconds,
    throughput: { work_per_second: Math.round(rate.workPerSecond * 100) / 100, measured_batches: rate.batches },
    queue_ahead: ahead,
    projected_cost: spec?.price ? planCost(spec.price, counts, own) : null,
  };
}

/** The lines the store answered (cached lines that were not repeats within the file). */
const remembered = (c: PlanCounts) => c.cached_lines - (c.lines - c.invalid_lines - c.distinct_requests);

const publicCounts = (c: PlanCounts) => ({
  lines: c.lines,
  invalid_lines: c.invalid_lines,
  distinct_requests: c.distinct_requests,
  cached_lines: c.cached_lines,
  input_tokens: c.input_tokens,
  max_output_tokens: c.max_output_tokens,
  shared_prefix_tokens: c.shared_prefix_tokens,
  tokenizer: c.tokenizer,
});

async function openInput(deps: PlanDeps, key: string, id: string) {
  const blob = await deps.blobs.open(key);
  if (!blob) throw new NotFoundError("file", id, "input_file_id");
  return blob.content;
}

/** A file a create would take and fail at once: the plan refuses it, naming its first fault and how many there are. */
function invalidFile(batch: Batch): InvalidRequestError {
  const errors = batch.errors?.data ?? [];
  const first = errors[0];
  const where = first?.line != null ? `line ${first.line}: ` : "";
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : "";
  return new InvalidRequestError(
    `The input file would fail validation as a batch: ${where}${first?.message ?? "it holds no valid request"}${more}`,
    "invalid_input_file",
    "input_file_id",
  );
}

/**
 * The model's rate on this deployment: the work of its last finished batches over the seconds they ran (prompt
 * tokens weighted as a line's cost is, pipeline/plan.ts); the default until one has finished.
 */
export async function measuredRate(batches: BatchRecords, model: string): Promise<{ workPerSecond: number; batches: number }> {
  const page = await batches.search({ status: "completed", model, limit: MEASURED_RUNS, owner: undefined });
  const runs = page.data.flatMap(({ batch }) =>
    batch.in_progress_at && batch.usage
      ? [
          {
            work: batch.usage.output_tokens + batch.usage.input_tokens * PROMPT_TOKEN_WEIGHT,
            seconds: (batch.completed_at ?? batch.finalizing_at ?? 0) - batch.in_progress_at,
          },
        ]
      : [],
  );
  const rate = rateOver(runs);
  return { workPerSecond: rate.workPerSecond, batches: rate.runs };
}

/** The model's batches queued or running (any key's: they share its engine), and their lines not yet done. */
async function queueAhead(batches: BatchRecords, model: string): Promise<{ batches: number; lines: number }> {
  let n = 0;
  let lines = 0;
  for (const status of ["validating", "in_progress"]) {
    const page = await batches.search({ status, model, limit: 1000, owner: undefined });
    for (const { batch } of page.data) {
      const c = batch.request_counts;
      n++;
      lines += Math.max(0, c.total - c.completed - c.failed);
    }
  }
  return { batches: n, lines };
}

/** Its cost at the model's price: cached lines at the cached-input price and no output; pool hours by its own time. */
export function planCost(price: Price, c: PlanCounts, seconds: number): NonNullable<BatchPlan["projected_cost"]> {
  const work = {
    seconds,
    inputTokens: c.input_tokens,
    cachedTokens: c.cached_input_tokens,
    outputTokens: c.max_output_tokens - c.cached_output_tokens,
  };
  if (price.basis === "tokens") return { currency: price.currency, amount: roundMoney(costOf(price, null, work)), basis: "tokens" };
  return { currency: price.currency, amount: roundMoney(costOf(price, "spot", work)), basis: "pool_hours" };
}
