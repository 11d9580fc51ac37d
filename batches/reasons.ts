// Why a shard's run stops early, as its requests' error lines say it (cancel, expiry, failure), or without a line
// (a shutdown or a spot reclaim: the shard is checkpointed and resumes).
import type { AbortReason } from "../pipeline/types.js";

export const CANCELLED: AbortReason = { code: "batch_cancelled", message: "The batch was cancelled before this request ran." };
export const EXPIRED: AbortReason = { code: "batch_expired", message: "The batch expired before this request ran." };
/** Why a request of a batch ended `failed` (a stop rule, a shard that could not run) was not run: the batch's errors say. */
export const STOPPED_WHY = "the batch was stopped (its errors say why); retry runs these lines again";
export const FAILED = (why: string): AbortReason => ({ code: "batch_failed", message: `The batch failed before this request ran: ${why}` });
/** A line of a model no live worker serves any more (taken out of the models file while its batch waited). */
export const UNSERVED = (model: string): AbortReason => ({
  code: "model_not_found",
  message: `The model '${model}' is not served here now: no live worker serves it (was it taken out of the models file?). Retry these lines once it is served again.`,
});
export const SHUTDOWN: AbortReason = { code: "shutdown", message: "The service is shutting down; the batch resumes on restart." };
/** Paused by its owner or an admin: a checkpoint like a preemption's, and it resumes where it stopped. */
export const PAUSED: AbortReason = {
  code: "shutdown",
  message: "The batch was paused; it resumes from its checkpoint.",
};
/** Its slot goes to a more urgent batch (state/sla.ts): a checkpoint like a preemption's, and it resumes later. */
export const YIELDED: AbortReason = {
  code: "shutdown",
  message: "It yielded its slot to a more urgent batch; the batch resumes from its checkpoint.",
};
/** A checkpoint like a shutdown's: nothing is written for what did not run, and the batch resumes. */
export const PREEMPTED: AbortReason = {
  code: "shutdown",
  message: "Its spot capacity was preempted; the batch resumes from its checkpoint.",
};
