// Shards that will never run, ended with a line for each request they still hold: those of stopped batches (the
// stop's reason), and those of a model no live worker serves any more (an adapter or a model taken out of the
// models file while its batch waited, across a restart). Claims go by the models a worker serves, so the latter
// would wait for ever: once its model has gone unserved for a grace while other workers are live (a worker
// restarting is back within it), its lines fail with model_not_found and the batch ends with what did run. While
// no worker is live at all, batches wait, as a create does (served-models.ts).
import type pino from "pino";
import type { AbortReason } from "../pipeline/types.js";
import type { ClaimedShard, WorkerRegistry, WorkQueue } from "../state/ports.js";
import { UNSERVED } from "./reasons.js";
import type { StartShardRun } from "./shard-run.js";

export interface CloseOutDeps {
  queue: WorkQueue;
  newRun: StartShardRun;
  logger: pino.Logger;
}

/** Writes the shard's remaining lines with `reason` and ends it. */
export async function closeOutShard(deps: CloseOutDeps, shard: ClaimedShard, reason: AbortReason): Promise<void> {
  const stop = new AbortController();
  stop.abort(reason);
  try {
    // Not metered: these lines record requests that never ran (the batch's counts and the totals have them).
    await deps.newRun(shard).run(undefined, stop.signal);
  } catch (err) {
    // Where even the error lines cannot be written, the shard still ends: finalizing counts its unrun
    // requests failed, so completed + failed == total holds.
    deps.logger.error(
      { err, batch_id: shard.batchId, shard: shard.idx },
      "cannot write the error lines of a shard that will not run; its requests are counted failed",
    );
    await deps.queue.finish(shard);
  }
}

/** How often the models of waiting shards are looked at against what the live workers serve. */
const LOOK_MS = 5_000;
const CLAIM_LIMIT = 20;

export class UnservedShards {
  /** Since when (ms) each model of a waiting shard has gone unserved. */
  private readonly since = new Map<string, number>();
  private lookedAt = 0;

  constructor(
    private readonly deps: CloseOutDeps & {
      workers: Pick<WorkerRegistry, "live">;
      leaseSeconds: number;
      graceSeconds: number;
      /**
       * What this process's own workers serve, where they are the only ones (the embedded mode): fixed for its life,
       * so a worker that leaves at a shutdown never makes its models look unserved. Absent: the live workers'.
       */
      served?: readonly string[];
      /** Its name in the shards it claims. */
      id: string;
    },
  ) {}

  /** One look (at most every LOOK_MS): the lines of models unserved for the grace are failed. */
  async closeOut(): Promise<void> {
    if (Date.now() - this.lookedAt < LOOK_MS) return;
    this.lookedAt = Date.now();
    const { queue, workers, leaseSeconds, logger } = this.deps;
    const live = this.deps.served ? [{ models: this.deps.served }] : await workers.live(leaseSeconds);
    if (live.length === 0) return void this.since.clear();
    const served = new Set(live.flatMap((w) => w.models));
    const unserved = new Set((await queue.slaSnapshot()).shards.map((s) => s.model).filter((m) => !served.has(m)));
    for (const m of this.since.keys()) if (!unserved.has(m)) this.since.delete(m);
    for (const m of unserved) if (!this.since.has(m)) this.since.set(m, Date.now());
    const due = [...unserved].filter((m) => Date.now() - this.since.get(m)! >= this.deps.graceSeconds * 1000);
    if (due.length === 0) return;
    const claimed = await queue.claimUnserved(this.deps.id, due, leaseSeconds, CLAIM_LIMIT);
    for (const shard of claimed) {
      logger.warn(
        { batch_id: shard.batchId, shard: shard.idx, model: shard.model, served: [...served] },
        "no live worker serves this shard's model: its lines fail with model_not_found",
      );
      await closeOutShard(this.deps, shard, UNSERVED(shard.model));
    }
    // More than one claim's worth: the next look comes at once.
    if (claimed.length === CLAIM_LIMIT) this.lookedAt = 0;
  }
}
