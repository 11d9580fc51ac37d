// The cluster's running totals (batches by final status, their requests by outcome, deadlines met or missed),
// kept in the state beside the batches and added to in the same write that ends a batch: /metrics reads them
// there (from the maintenance's leader), so no process's exit loses a count.
import { isFinal } from "../domain/batch-state.js";
import type { Batch, BatchStatus } from "../domain/objects.js";
import type { Owner } from "../domain/ports.js";

export type Totals = Record<string, number>;

/** The totals' name for a key's tokens of one kind on one model (owner "-": no key). */
export const keyTokensName = (owner: Owner, model: string, kind: "input" | "cached" | "output") =>
  `key_tokens:${owner ?? "-"}|${model}|${kind}`;

/** What a batch adds to the totals as it ends (nothing unless it goes from open to final), its tokens by key and model too. */
export function endTotals(was: BatchStatus | null, b: Batch, owner: Owner): Array<[string, number]> {
  if ((was !== null && isFinal(was)) || !isFinal(b.status)) return [];
  const out: Array<[string, number]> = [
    [`batches:${b.status}`, 1],
    ["requests:completed", b.request_counts.completed],
    ["requests:failed", b.request_counts.failed],
  ];
  if (b.deadline_met !== null) out.push([`deadlines:${b.deadline_met ? "met" : "missed"}`, 1]);
  const byModel = b.usage_by_model ? Object.entries(b.usage_by_model).map(([model, m]) => [model, m.usage] as const) : [];
  if (!b.usage_by_model && b.model) byModel.push([b.model, b.usage]);
  for (const [model, u] of byModel) {
    const kinds = [
      ["input", u.input_tokens],
      ["cached", u.input_tokens_details.cached_tokens],
      ["output", u.output_tokens],
    ] as const;
    for (const [kind, n] of kinds) if (n > 0) out.push([keyTokensName(owner, model, kind), n]);
  }
  return out;
}
