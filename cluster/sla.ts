// SLA enforcement, the proof of concept's stub made real: an urgent batch that waits while every slot that could
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
 * deadline. `pending` are victims already asked (still running): each counts for one waiting urgent shard.
 */
export function chooseYields(s: SlaSnapshot, now: number, urgentSeconds: number, pending: ReadonlySet<string> = new Set()): Yield[] {
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
  let asked = [...pending].filter((k) => running.some((r) => key(r) === k)).length;
  const out: Yield[] = [];
  for (const w of waiting) {
    if (s.workers.some((x) => serves(x, w.model) && x.inUse < x.capacity)) continue;
    if (asked > 0) {
      asked--;
      continue;
    }
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

/** When the batch ends at the rate it has run so far (unix seconds); null before it has a rate. */
export function projectedFinish(b: Pick<SlaBatch, "total" | "done" | "inProgressAt">, now: number): number | null {
  if (b.inProgressAt === null || b.done <= 0) return null;
  if (b.done >= b.total) return now;
  const rate = b.done / Math.max(1, now - b.inProgressAt);
  return Math.ceil(now + (b.total - b.done) / rate);
}
