// One unref'd timer per unfinished batch, firing at its deadline. Timers never keep the process alive.

/** setTimeout's longest delay (about 24.8 days); longer waits are chained. */
const MAX_DELAY_MS = 2 ** 31 - 1;

export class DeadlineTimers {
  private readonly timers = new Map<string, NodeJS.Timeout>();

  /** Calls `onDue` once `deadlineAt` (unix seconds) has passed; re-arming an id replaces its timer. */
  arm(id: string, deadlineAt: number, onDue: () => void): void {
    this.clear(id);
    const delay = deadlineAt * 1000 - Date.now();
    const timer = setTimeout(
      () => {
        this.timers.delete(id);
        if (delay > MAX_DELAY_MS) this.arm(id, deadlineAt, onDue);
        else onDue();
      },
      Math.max(0, Math.min(delay, MAX_DELAY_MS)),
    );
    timer.unref();
    this.timers.set(id, timer);
  }

  clear(id: string): void {
    const t = this.timers.get(id);
    if (t) clearTimeout(t);
    this.timers.delete(id);
  }

  clearAll(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  get size(): number {
    return this.timers.size;
  }
}
