// One holder among all processes: a PostgreSQL advisory lock on a connection of its own. The lock lives as long
// as the connection: when its process dies (or loses the database) it is free, and another process takes it.
import pg from "pg";
import type { LeaderLock } from "../ports.js";

export class PgLeaderLock implements LeaderLock {
  private client: pg.Client | undefined;

  constructor(
    private readonly url: string,
    private readonly key: number,
  ) {}

  get held(): boolean {
    return this.client !== undefined;
  }

  async hold(): Promise<boolean> {
    if (this.client) return true;
    const c = new pg.Client({ connectionString: this.url });
    c.on("error", () => undefined);
    try {
      await c.connect();
      const { rows } = await c.query("SELECT pg_try_advisory_lock($1) AS ok", [this.key]);
      if (!rows[0].ok) {
        await c.end();
        return false;
      }
    } catch {
      await c.end().catch(() => undefined);
      return false;
    }
    const lost = () => {
      if (this.client !== c) return;
      this.client = undefined;
      c.end().catch(() => undefined);
    };
    c.on("end", lost);
    c.on("error", lost);
    this.client = c;
    return true;
  }

  async release(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }
}
