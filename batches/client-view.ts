// What a stored batch gains as it is answered: its cost at its model's price (domain/cost.ts) and the one
// projection of its finish (state/sla.ts), which the API, the SLA alert and the console share.
import type { ModelRegistry } from "../backends/registry.js";
import { isFinal } from "../domain/batch-state.js";
import { priced } from "../domain/cost.js";
import type { Batch } from "../domain/objects.js";
import { projectedFinish } from "../state/sla.js";

export function clientView(batch: Batch, registry: ModelRegistry, now: number): Batch {
  // A paused batch has no finish to project: it ends when it is resumed, or at its deadline.
  const projected =
    isFinal(batch.status) || batch.paused_at
      ? null
      : projectedFinish(
          {
            total: batch.request_counts.total,
            done: batch.request_counts.completed + batch.request_counts.failed,
            inProgressAt: batch.in_progress_at,
          },
          now,
        );
  return {
    ...priced(batch, registry),
    projected_finish_at: projected,
    deadline_at_risk: projected === null ? null : projected > batch.deadline_at,
  };
}
