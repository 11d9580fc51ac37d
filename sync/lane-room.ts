// A lane's room for one model: so many requests at once (the room may change as the backend's concurrency or a
// batch at risk does), then a bounded FIFO queue; a request past both is refused at once with a Retry-After
// (laneFull), never left to wait unseen. lanes.ts keeps one per lane and model.
import { laneFull } from "../domain/errors.js";
import { type ServedTier, TIER_OF_LANE } from "../domain/sync-inference.js";
import type { Lane } from "../openai/backend.js";

/** What a full lane's 429 asks a client to wait: an interactive answer frees a sequence in seconds, batch work takes longer. */
const RETRY_AFTER_SECONDS: Record<Lane, number> = { interactive: 1, batch: 10 };

/** Room for `size()` requests at once, then a FIFO queue of at most `queueMax`; a request past both is refused. */
export class LaneRoom {
  running = 0;
  served = 0;
  refused = 0;
  /**
   * The interactive lane only: a batch of the model is at risk of its deadline, so the lane gives its share of the
   * model back (its room is then one, and the engine keeps no sequence free for it).
   */
  batchAtRisk = false;
  private readonly queue: Array<() => void> = [];

  get waiting(): number {
    return this.queue.length;
  }

  /** The tier its requests asked for, as responses, errors and /metrics name it. */
  get tier(): ServedTier {
    return TIER_OF_LANE[this.lane];
  }

  constructor(
    readonly lane: Lane,
    readonly model: string,
    readonly size: () => number,
    readonly queueMax: number,
  ) {}

  enter(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    if (this.running < this.size() && this.queue.length === 0) {
      this.running++;
      return Promise.resolve();
    }
    if (this.queue.length >= this.queueMax) {
      this.refused++;
      return Promise.reject(laneFull(this.tier, RETRY_AFTER_SECONDS[this.lane]));
    }
    return new Promise<void>((resolve, reject) => {
      const admit = () => {
        signal.removeEventListener("abort", onAbort);
        this.running++;
        resolve();
      };
      const onAbort = () => {
        const i = this.queue.indexOf(admit);
        if (i !== -1) this.queue.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.queue.push(admit);
    });
  }

  leave(): void {
    this.running--;
    while (this.running < this.size() && this.queue.length > 0) this.queue.shift()!();
  }
}
