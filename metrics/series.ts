// The console's live charts: engine tokens/s and requests/s, queue depth and pool occupancy, sampled every few
// seconds and kept for the last 15 minutes in this process (a ring, never growing).

export interface SeriesPoint {
  /** Unix seconds. */
  t: number;
  tokens_per_second: number;
  requests_per_second: number;
  queue_depth: number;
  /** Slots in use per pool, and their capacity. */
  pools: Record<string, { in_use: number; capacity: number }>;
}

export interface SeriesSource {
  totals(): { completionTokens: number; requests: number };
  queueDepth(): Promise<number>;
  pools(): Promise<Array<{ name: string; in_use: number; capacity: number }>>;
}

export const SERIES_INTERVAL_SECONDS = 5;
const KEEP = (15 * 60) / SERIES_INTERVAL_SECONDS;

export class Series {
  private readonly points: SeriesPoint[] = [];
  private last: { at: number; completionTokens: number; requests: number };
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly source: SeriesSource,
    private readonly now: () => number = () => Date.now() / 1000,
  ) {
    this.last = { at: now(), ...source.totals() };
  }

  /** Samples now (the charts have a point from the start), then every interval. */
  start(intervalSeconds = SERIES_INTERVAL_SECONDS): void {
    void this.sample().catch(() => undefined);
    this.timer = setInterval(() => void this.sample().catch(() => undefined), intervalSeconds * 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Takes one point now (the timer does this every interval). */
  async sample(): Promise<SeriesPoint> {
    const at = this.now();
    const totals = this.source.totals();
    const seconds = Math.max(1e-3, at - this.last.at);
    const [depth, pools] = await Promise.all([this.source.queueDepth(), this.source.pools()]);
    const point: SeriesPoint = {
      t: Math.round(at),
      tokens_per_second: Math.max(0, totals.completionTokens - this.last.completionTokens) / seconds,
      requests_per_second: Math.max(0, totals.requests - this.last.requests) / seconds,
      queue_depth: depth,
      pools: Object.fromEntries(pools.map((p) => [p.name, { in_use: p.in_use, capacity: p.capacity }])),
    };
    this.last = { at, ...totals };
    this.points.push(point);
    if (this.points.length > KEEP) this.points.shift();
    return point;
  }

  list(): SeriesPoint[] {
    return this.points.map((p) => ({ ...p, pools: { ...p.pools } }));
  }
}
