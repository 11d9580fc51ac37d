// Several base URLs serving one model: requests go to the healthy one with the fewest in flight; one that
// fails (refused or reset connections, 5xx, timeouts) sits out a cooldown that doubles while it keeps failing,
// and comes back after one success. With every URL cooling down, the one due back first is used.

export const COOLDOWN_MS = 5_000;
export const MAX_COOLDOWN_MS = 60_000;

interface Target {
  url: string;
  inFlight: number;
  coolUntil: number;
  cooldown: number;
  failures: number;
}

export class BaseUrls {
  private readonly targets: Target[];
  private turn = 0;

  constructor(
    urls: readonly string[],
    private readonly now: () => number = Date.now,
  ) {
    if (urls.length === 0) throw new RangeError("at least one base URL");
    this.targets = urls.map((url) => ({ url, inFlight: 0, coolUntil: 0, cooldown: 0, failures: 0 }));
  }

  /** The URL the next request goes to; call `done` with it when the request ends. */
  pick(): string {
    const t = this.now();
    const healthy = this.targets.filter((x) => x.coolUntil <= t);
    const pool = healthy.length > 0 ? healthy : [this.targets.reduce((a, b) => (a.coolUntil <= b.coolUntil ? a : b))];
    // Fewest in flight; ties rotate, so equal URLs share the load.
    const start = this.turn++ % pool.length;
    let best = pool[start];
    for (let i = 1; i < pool.length; i++) {
      const c = pool[(start + i) % pool.length];
      if (c.inFlight < best.inFlight) best = c;
    }
    best.inFlight++;
    return best.url;
  }

  done(url: string, healthy: boolean): void {
    const target = this.targets.find((x) => x.url === url);
    if (!target) return;
    target.inFlight--;
    if (healthy) {
      target.cooldown = 0;
      target.coolUntil = 0;
      return;
    }
    target.failures++;
    target.cooldown = Math.min(MAX_COOLDOWN_MS, target.cooldown === 0 ? COOLDOWN_MS : target.cooldown * 2);
    target.coolUntil = this.now() + target.cooldown;
  }

  status(): Array<{ url: string; in_flight: number; cooling_down: boolean; failures: number }> {
    const t = this.now();
    return this.targets.map((x) => ({ url: x.url, in_flight: x.inFlight, cooling_down: x.coolUntil > t, failures: x.failures }));
  }
}
