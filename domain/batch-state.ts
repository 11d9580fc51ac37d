// Every batch status change goes through transition(): OpenAI's eight statuses and the edges between them.
import type { Batch, BatchStatus } from "./objects.js";

const EDGES: Record<BatchStatus, readonly BatchStatus[]> = {
  validating: ["in_progress", "failed", "cancelling", "cancelled", "expired"],
  in_progress: ["finalizing", "cancelling", "expired", "failed"],
  finalizing: ["completed", "failed", "expired"],
  cancelling: ["cancelled"],
  completed: [],
  failed: [],
  expired: [],
  cancelled: [],
};

/** The timestamp each status sets when entered ("validating" is stamped by created_at). */
const STAMP: Partial<Record<BatchStatus, keyof Batch>> = {
  in_progress: "in_progress_at",
  finalizing: "finalizing_at",
  completed: "completed_at",
  failed: "failed_at",
  expired: "expired_at",
  cancelling: "cancelling_at",
  cancelled: "cancelled_at",
};

export function isFinal(status: BatchStatus): boolean {
  return EDGES[status].length === 0;
}

/** Final, or on its way there (being cancelled, or writing its last results): nothing may end it otherwise. */
export function isEnding(status: BatchStatus): boolean {
  return isFinal(status) || status === "cancelling" || status === "finalizing";
}

export function canTransition(from: BatchStatus, to: BatchStatus): boolean {
  return EDGES[from].includes(to);
}

export class InvalidTransitionError extends Error {
  constructor(
    readonly batchId: string,
    readonly from: BatchStatus,
    readonly to: BatchStatus,
  ) {
    super(`batch ${batchId}: status ${from} cannot become ${to}`);
    this.name = "InvalidTransitionError";
  }
}

/**
 * Moves `batch` to `to` in place and stamps the entry time (unix seconds); throws on a forbidden edge. A batch that
 * is ending is no longer paused: `paused_at` says "paused since", and nothing of an ending batch waits for a resume.
 */
export function transition(batch: Batch, to: BatchStatus, now: number): void {
  if (!canTransition(batch.status, to)) throw new InvalidTransitionError(batch.id, batch.status, to);
  batch.status = to;
  const stamp = STAMP[to];
  if (stamp) (batch as Record<string, unknown>)[stamp] = now;
  if (isEnding(to) && batch.paused_at) batch.paused_at = null;
}

/** When a batch reached its final status, or null while it has not. */
export function endedAt(b: Batch): number | null {
  return b.completed_at ?? b.failed_at ?? b.expired_at ?? b.cancelled_at;
}
