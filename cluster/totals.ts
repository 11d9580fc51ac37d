// The cluster's running totals (batches by final status, their requests by outcome, deadlines met or missed),
// kept in the state beside the batches and added to in the same write that ends a batch: /metrics reads them
// there (from the maintenance's leader), so no process's exit loses a count.
import { isFinal } from "../domain/batch-state.js";
import type { Batch, BatchStatus } from "../domain/objects.js";

export type Totals = Record<string, number>;

/** What a batch adds to the totals as it ends (nothing unless it goes from open to final). */
export function endTotals(was: BatchStatus | null, b: Batch): Array<[string, number]> {
  if ((was !== null && isFinal(was)) || !isFinal(b.status)) return [];
  const out: Array<[string, number]> = [
    [`batches:${b.status}`, 1],
    ["requests:completed", b.request_counts.completed],
    ["requests:failed", b.request_counts.failed],
  ];
  if (b.deadline_met !== null) out.push([`deadlines:${b.deadline_met ? "met" : "missed"}`, 1]);
  return out;
}
