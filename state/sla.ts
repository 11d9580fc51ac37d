// SLA enforcement: an urgent batch that waits while every slot that could
// run it is taken makes a less urgent batch's running shard yield at its next checkpoint (spot work first), so the
// urgent one takes the slot and the other resumes later from its checkpoint, with no rework. And each batch's
// projected finish, from its measured rate, says a deadline is at risk before it is missed.
import { isUrgent } from "./urgency.js";

/** An open shard as the scheduler sees it. */
export interface SlaShard {
  batchId: string;
  idx: number;
  model: string;
  state: "queued" | "running";
  workerId: string | null;
  submittedAt: number;
  deadlineAt: number;
}

export interface SlaWorker {
  id: string;
  pool: "spot" | "dedicated";
  capacity: number;
  inUse: number;
  models: string[];
  preempted: boolean;
}

/** An open batch's progress, for its projection. */
export interface SlaBatch {
  id: string;
  total: number;
  done: number;
  /** Unix seconds; null while it has not started. */
  inProgressAt: number | null;
  deadlineAt: number;
}

export interface SlaSnapshot {
  shards: SlaShard[];
  workers: SlaWorker[];
  batches: SlaBatch[];
}

export interface Yield {
  /** The running shard that yields, on its worker and pool. */
  victim: { batchId: string; idx: number; workerId: string; pool: "spot" | "dedicated" };
  /** The urgent batch it yields to. */
  for: { batchId: string; idx: number; deadlineAt: number };
}

/**
 * Which running shards yield now: one for each urgent shard that waits with no free slot among the workers that
 * serve its model, taken from a batch that is not urgent on such a worker, spot before dedicated, then the latest
 * deadline. `pending` maps each victim already asked to the urgent shard it was asked for (`batch/idx` both): that
 * shard is provided for while it waits, whether its victim still drains or has yielded and the workers' counts
 * have not caught up (they are read apart from the shards), and a victim is never asked twice.
 */
export function chooseYields(
  s: SlaSnapshot,
  now: number,
  urgentSeconds: number,
  pending: ReadonlyMap<string, string> = new Map(),
): Yield[] {
  const urgent = (x: SlaShard) => isUrgent(x, now, urgentSeconds);
  const workers = new Map(s.workers.map((w) => [w.id, w]));
  const serves = (w: SlaWorker | undefined, model: string) => w !== undefined && !w.preempted && w.models.includes(model);
  const waiting = s.shards.filter((x) => x.state === "queued" && urgent(x)).sort((a, b) => a.deadlineAt - b.deadlineAt);
  const key = (x: { batchId: string; idx: number }) => `${x.batchId}/${x.idx}`;
  const running = s.shards
    .filter((x) => x.state === "running" && x.workerId && !urgent(x))
    .sort((a, b) => {
      const pa = workers.get(a.workerId!)?.pool === "spot" ? 0 : 1;
      const pb = workers.get(b.workerId!)?.pool === "spot" ? 0 : 1;
      return pa - pb || b.deadlineAt - a.deadlineAt;
    });
  const taken = new Set<string>();
  const providedFor = new Set(pending.values());
  const out: Yield[] = [];
  for (const w of waiting) {
    if (s.workers.some((x) => serves(x, w.model) && x.inUse < x.capacity)) continue;
    if (providedFor.has(key(w))) continue;
    const victim = running.find((r) => !taken.has(key(r)) && !pending.has(key(r)) && serves(workers.get(r.workerId!), w.model));
    if (!victim) continue;
    taken.add(key(victim));
    const worker = workers.get(victim.workerId!)!;
    out.push({
      victim: { batchId: victim.batchId, idx: victim.idx, workerId: worker.id, pool: worker.pool },
      for: { batchId: w.batchId, idx: w.idx, deadlineAt: w.deadlineAt },
    });
  }
  return out;
}

/**
 * A projection needs a sample: the first lines run while the model warms up, and the costliest lines run first, so
 * a rate from a handful of them predicts a finish far too late (a 3,000-line batch once looked "at risk" after 3).
 */
export const MIN_SAMPLE = { lines: 20, share: 0.05, seconds: 30 };

/**
 * When the batch ends at the rate it has run so far (unix seconds). Null while estimating: before it started, and
 * until it has run MIN_SAMPLE's lines (20, or 5% of a larger batch) and seconds. The one estimator of the API's
 * projected_finish_at, the at-risk alert and the console.
 */
export function projectedFinish(b: Pick<SlaBatch, "total" | "done" | "inProgressAt">, now: number): number | null {
  if (b.inProgressAt === null || b.done <= 0) return null;
  if (b.done >= b.total) return now;
  const lines = Math.min(b.total, Math.max(MIN_SAMPLE.lines, Math.ceil(b.total * MIN_SAMPLE.share)));
  if (b.done < lines || now - b.inProgressAt < MIN_SAMPLE.seconds) return null;
  const rate = b.done / Math.max(1, now - b.inProgressAt);
  return Math.ceil(now + (b.total - b.done) / rate);
}
