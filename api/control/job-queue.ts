// The bounded FIFO of batches waiting for a pool, with SLA-aware selection: batches resumed after a
// restart go first, then batches near their deadline (earliest deadline first), then submission order, or,
// given a rank, the lowest rank in submission order (the worker ranks by model, so that a batch for one model
// does not wait behind another model's).
import Denque from "denque";
import { queueFull } from "./errors.js";

export interface QueuedJob {
  batchId: string;
  seq: number;
  /** Unix seconds. */
  submittedAt: number;
  deadlineAt: number;
  /** Was running when the service stopped; its partial results are on disk. */
  resumed?: boolean;
  /** The registry model that serves it. */
  model?: string;
}

/** Fraction of the window left under which a job counts as urgent whatever its length. */
export const URGENT_WINDOW_FRACTION = 0.1;

/** Near its deadline: less than `urgentSeconds` left, or less than 10% of its completion window. */
export function isUrgent(job: Pick<QueuedJob, "submittedAt" | "deadlineAt">, now: number, urgentSeconds: number): boolean {
  const left = job.deadlineAt - now;
  const window = job.deadlineAt - job.submittedAt;
  return left < urgentSeconds || left < window * URGENT_WINDOW_FRACTION;
}

export interface JobQueueOptions {
  maxDepth: number;
  urgentSeconds: number;
  /** The Retry-After sent with a 429 when the queue is full. */
  retryAfterSeconds: number;
}

export class JobQueue {
  private readonly items = new Denque<QueuedJob>();

  constructor(private readonly opts: JobQueueOptions) {}

  get depth(): number {
    return this.items.length;
  }

  get maxDepth(): number {
    return this.opts.maxDepth;
  }

  /** Throws the 429 when `extra` more jobs would not fit (lets a caller refuse before doing any work). */
  ensureRoom(extra = 1): void {
    if (this.items.length + extra > this.opts.maxDepth) throw queueFull(this.opts.retryAfterSeconds);
  }

  /** `force` skips the bound: recovered jobs were accepted before the restart and must not be dropped. */
  enqueue(job: QueuedJob, opts: { force?: boolean } = {}): void {
    if (!opts.force) this.ensureRoom(1);
    this.items.push(job);
  }

  /** The job the worker should start next, left in the queue (it is removed once a pool is leased). */
  peekNext(now: number, rank?: (job: QueuedJob) => number): QueuedJob | undefined {
    let urgent: QueuedJob | undefined;
    let best: QueuedJob | undefined;
    let bestRank = Number.POSITIVE_INFINITY;
    for (let i = 0; i < this.items.length; i++) {
      const job = this.items.peekAt(i)!;
      if (job.resumed) return job;
      if (isUrgent(job, now, this.opts.urgentSeconds) && (!urgent || job.deadlineAt < urgent.deadlineAt)) urgent = job;
      const r = rank ? rank(job) : 0;
      if (r < bestRank) [best, bestRank] = [job, r];
    }
    return urgent ?? best;
  }

  /** The first job, in submission order, that `match` accepts. */
  find(match: (job: QueuedJob) => boolean): QueuedJob | undefined {
    for (let i = 0; i < this.items.length; i++) {
      const job = this.items.peekAt(i)!;
      if (match(job)) return job;
    }
    return undefined;
  }

  /** Takes a job out wherever it sits (started, cancelled or expired while waiting). */
  remove(batchId: string): QueuedJob | undefined {
    for (let i = 0; i < this.items.length; i++) {
      if (this.items.peekAt(i)!.batchId === batchId) return this.items.removeOne(i);
    }
    return undefined;
  }

  has(batchId: string): boolean {
    return this.items.toArray().some((j) => j.batchId === batchId);
  }

  toArray(): QueuedJob[] {
    return this.items.toArray();
  }
}
