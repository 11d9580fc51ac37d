// A lane's gate for one model: room for so many requests at once (the room may change as the backend's
// concurrency or a batch at risk does), then a bounded FIFO queue; a request past both is refused at once with a
// Retry-After (laneFull), never left to wait unseen. Split from sync-lanes.ts, which keeps a gate per tier and model.
import { laneFull } from "../domain/errors.js";
import type { ServedTier } from "../domain/sync-inference.js";

/** What a full lane's 429 asks a client to wait: an interactive answer frees a sequence in seconds, a flex wait is longer. */
const RETRY_AFTER_SECONDS: Record<ServedTier, number> = { default: 1, flex: 10 };

/** Room for `room()` requests at once, then a FIFO queue of at most `queueMax`; a request past both is refused. */
export class Gate {
  running = 0;
  served = 0;
  refused = 0;
  /** The interactive lane's share is given back to an at-risk batch (its room is then one). */
  givenBack = false;
  private readonly queue: Array<() => void> = [];

  get waiting(): number {
    return this.queue.length;
  }

  constructor(
    readonly tier: ServedTier,
    readonly model: string,
    readonly room: () => number,
    readonly queueMax: number,
  ) {}

  enter(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    if (this.running < this.room() && this.queue.length === 0) {
      this.running++;
      return Promise.resolve();
    }
    if (this.queue.length >= this.queueMax) {
      this.refused++;
      return Promise.reject(laneFull(this.tier, RETRY_AFTER_SECONDS[this.tier]));
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
    while (this.running < this.room() && this.queue.length > 0) this.queue.shift()!();
  }
}
