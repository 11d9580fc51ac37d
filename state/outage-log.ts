// An outage said twice, when it starts and when it ends, instead of once per failed try (a worker beats every few
// seconds and the maintenance ticks every second: a database down for a minute would otherwise fill the log).
import type pino from "pino";

/** How long after an outage was said a try that works is still no news of its end. */
const SETTLE_MS = 1_000;

export class OutageLog {
  private since: number | undefined;
  /** When the outage was said, on the monotonic clock: what a try begun before it says is no news (ok). */
  private saidAt = 0;
  private tries = 0;

  constructor(
    private readonly logger: pino.Logger,
    /** What fails, as the log line says it: "heartbeat", "maintenance tick". */
    private readonly what: string,
    /** The two lines, where "<what> failed" and "<what> works again" do not say it well. */
    private readonly say?: { down: string; up: string },
  ) {}

  failed(err: unknown, fields: Record<string, unknown> = {}): void {
    this.tries++;
    if (this.since !== undefined) return;
    this.since = Date.now();
    this.saidAt = performance.now();
    this.logger.warn(
      { ...fields, err: (err as Error | undefined)?.message },
      this.say?.down ?? `${this.what} failed; retrying (said again when it works)`,
    );
  }

  /**
   * How long the outage that just ended lasted (ms), or 0 when there was none. `begun` (performance.now()): when
   * the try that worked began; one begun before the outage was said (a query on a connection the database was
   * still closing) does not end it, or the log would say it ended and began again.
   */
  ok(begun?: number): number {
    if (this.since === undefined) return 0;
    // A database going down ends its connections one at a time: a query on one it has not reached yet may still
    // answer just after another failed. Only a try begun a moment after the outage was said can end it.
    if (begun !== undefined && begun < this.saidAt + SETTLE_MS) return 0;
    const ms = Date.now() - this.since;
    this.logger.info({ down_ms: ms, tries: this.tries }, this.say?.up ?? `${this.what} works again`);
    this.since = undefined;
    this.tries = 0;
    return ms;
  }
}
