// How many of a run's lines compute at once where more are in flight: over a result cache a line stays in flight
// until its answer is stored, so a run keeps more lines in flight than the backend computes (run-batch.ts). The
// others wait here, in the order they came, rather than in the backend's own wait list, where the engine matches
// every freed sequence against each waiting prompt (engine/pool/pool.ts): a wait list four times as long made a
// 2,000-line batch over an empty cache 9% slower than with the cache off.

/** Gives up the place; a second call does nothing. */
export type Release = () => void;

export class ComputeGate {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly places: number) {}

  /** A place once one is free, in turn; rejects with the signal's reason if it aborts first. */
  acquire(signal?: AbortSignal): Promise<Release> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.held < this.places) {
      this.held++;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const turn = () => {
        signal?.removeEventListener("abort", leave);
        resolve(this.releaser());
      };
      const leave = () => {
        const at = this.waiting.indexOf(turn);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal!.reason);
      };
      this.waiting.push(turn);
      signal?.addEventListener("abort", leave, { once: true });
    });
  }

  /** A place held: handed to the first waiter when given up, else freed. */
  private releaser(): Release {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.held--;
    };
  }
}
