// Stop rules in force (domain/stop-rules.ts): whoever runs a batch's shards looks at its figures as they grow, at
// most twice a second per batch, and ends it `failed` with the rule and the figures in its errors. Cost and output
// tokens are the batch's committed figures; the error rate is judged on the lines its runs in this process look at
// (each run's ErrorSample, summed), which tell a refusal from a run line. The stop is the same
// conditional update a cancel makes, so of two workers that see it at once one wins; the stop event then aborts
// the batch's runs everywhere, and what never ran gets its error line as for any stopped batch.
import type pino from "pino";
import type { ModelRegistry } from "../backends/registry.js";
import { batchCost } from "../domain/cost.js";
import type { Owner } from "../domain/ports.js";
import { brokenRule, type ErrorSample, hasStopRules, type StopRules, stopRulesOf } from "../domain/stop-rules.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import type { BatchRecords, EventBus } from "../state/ports.js";

const CHECK_MS = 500;
/** Batches whose samples are kept at once: far more than a process runs. */
const MAX_BATCHES = 1024;

export interface StopWatchDeps {
  batches: BatchRecords;
  events: EventBus;
  registry: ModelRegistry;
  /** The keys file's defaults for an owner's batches. */
  defaults?: (owner: Owner) => StopRules;
  metrics?: BatchMetrics;
  logger: pino.Logger;
}

export class StopWatch {
  private readonly due = new Map<string, NodeJS.Timeout>();
  /** Each batch's runs here, by run, with the lines each has looked at so far. */
  private readonly samples = new Map<string, Map<string, ErrorSample>>();

  constructor(private readonly deps: StopWatchDeps) {}

  /** The batch made progress (its run `run` has looked at `sample`): its rules are checked within half a second. */
  soon(batchId: string, run?: string, sample?: ErrorSample): void {
    if (run && sample) {
      const runs = this.samples.get(batchId) ?? new Map<string, ErrorSample>();
      runs.set(run, { ...sample });
      this.samples.set(batchId, runs);
      // A batch that ends while no check is due keeps its entry: the oldest go once there are many.
      if (this.samples.size > MAX_BATCHES) this.samples.delete(this.samples.keys().next().value!);
    }
    if (this.due.has(batchId)) return;
    const timer = setTimeout(() => {
      this.due.delete(batchId);
      this.check(batchId).catch((err) => this.deps.logger.warn({ err, batch_id: batchId }, "cannot check the batch's stop rules"));
    }, CHECK_MS);
    timer.unref();
    this.due.set(batchId, timer);
  }

  /** Ends the batch if its figures break one of its rules; true when this call stopped it. */
  async check(batchId: string): Promise<boolean> {
    const { batches, events, registry, logger } = this.deps;
    const row = await batches.get(batchId);
    if (!row || row.stopReason || !["validating", "in_progress"].includes(row.batch.status)) {
      this.samples.delete(batchId);
      return false;
    }
    const rules = rulesOf(row.batch.metadata, this.deps.defaults?.(row.owner));
    if (!rules || !hasStopRules(rules)) return false;
    const broken = brokenRule(rules, row.batch, batchCost(row.batch, registry), this.sampleOf(batchId));
    if (!broken) return false;
    const stopped = await batches.update(batchId, ["validating", "in_progress"], (r) => {
      if (r.stopReason) return false;
      const entry = { code: "stop_rule", message: broken.message, line: null, param: `metadata.${broken.rule}` };
      r.batch.errors = { object: "list", data: [...(r.batch.errors?.data ?? []), entry] };
      r.stopReason = "failed";
    });
    if (!stopped) return false;
    this.deps.metrics?.batchStopped(broken.rule);
    logger.warn({ batch_id: batchId, rule: broken.rule, request_counts: row.batch.request_counts }, broken.message);
    await events.publish({ type: "stop", batch_id: batchId, reason: "failed" }).catch(() => undefined);
    return true;
  }

  /** The lines the batch's runs here have looked at, summed; undefined before any has reported. */
  private sampleOf(batchId: string): ErrorSample | undefined {
    const runs = this.samples.get(batchId);
    if (!runs) return undefined;
    const sum: ErrorSample = { lines: 0, early: 0, refused: 0, begun: 0, ended: 0, failed: 0 };
    for (const s of runs.values()) for (const k of Object.keys(sum) as (keyof ErrorSample)[]) sum[k] += s[k];
    return sum;
  }

  close(): void {
    for (const t of this.due.values()) clearTimeout(t);
    this.due.clear();
    this.samples.clear();
  }
}

/** A batch's rules; one whose metadata was refused at create cannot be here, but a changed keys file is not fatal. */
function rulesOf(metadata: Record<string, string> | null | undefined, defaults: StopRules | undefined): StopRules | undefined {
  try {
    return stopRulesOf(metadata, defaults);
  } catch {
    return defaults;
  }
}
