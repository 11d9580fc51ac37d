// Startup recovery: every batch that was not final when the service stopped is picked up again.
// Running ones (in_progress, finalizing) resume first and skip every custom_id already on disk;
// queued ones go back in their submission order; what was being cancelled ends cancelled; what
// passed its deadline while the service was down ends expired.
import type pino from "pino";
import type { BatchStore } from "../stores/batch-store.js";
import { isFinal } from "./batch-state.js";
import type { QueueingBatchService } from "./batch-service.js";
import { CANCELLED, EXPIRED, type JobRunner } from "./job-runner.js";

export interface RecoveryDeps {
  store: BatchStore;
  runner: JobRunner;
  batches: QueueingBatchService;
  logger: pino.Logger;
  now: () => number;
}

export async function recoverBatches({ store, runner, batches, logger, now }: RecoveryDeps): Promise<void> {
  const counts = { resumed: 0, requeued: 0, cancelled: 0, expired: 0 };
  // all() is in submission order, so the queue gets back its original order.
  for (const rec of store.all()) {
    const b = rec.batch;
    if (isFinal(b.status)) continue;
    if (b.status === "cancelling") {
      await runner.closeOut(rec, CANCELLED);
      counts.cancelled++;
    } else if (b.status !== "finalizing" && now() >= b.deadline_at) {
      await runner.closeOut(rec, EXPIRED);
      counts.expired++;
    } else if (b.status === "validating") {
      batches.schedule(rec);
      counts.requeued++;
    } else {
      batches.schedule(rec, { resumed: true });
      counts.resumed++;
    }
  }
  if (counts.resumed + counts.requeued + counts.cancelled + counts.expired > 0) logger.info(counts, "recovered unfinished batches");
}
