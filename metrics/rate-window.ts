// A moving average of events per second: per-second buckets over the last `seconds`, so a gauge
// read at any moment shows recent throughput, and 0 soon after the work stops.
export class RateWindow {
  private readonly buckets: number[];
  private readonly stamps: number[];

  constructor(
    private readonly seconds: number,
    private readonly now: () => number = Date.now,
  ) {
    this.buckets = new Array(seconds).fill(0);
    this.stamps = new Array(seconds).fill(-1);
  }

  add(n: number): void {
    const sec = Math.floor(this.now() / 1000);
    const i = sec % this.seconds;
    if (this.stamps[i] !== sec) {
      this.stamps[i] = sec;
      this.buckets[i] = 0;
    }
    this.buckets[i] += n;
  }

  /** Events per second over the window that ends now. */
  rate(): number {
    const sec = Math.floor(this.now() / 1000);
    let sum = 0;
    for (let i = 0; i < this.seconds; i++) if (this.stamps[i] > sec - this.seconds) sum += this.buckets[i];
    return sum / this.seconds;
  }
}
