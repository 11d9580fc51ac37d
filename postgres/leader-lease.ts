// One holder among all processes: a lease row on the database's clock, renewed by its holder. A holder that
// freezes or is cut off loses it when the lease lapses (another process takes it over with a higher term); it
// knows this itself from its own monotonic clock, and whatever it still tries to write through the fenced
// connection (LeaderDb) is refused by the database: the term must match and the lease must not have lapsed.
import { performance } from "node:perf_hooks";
import type pg from "pg";
import { type LeaderLock, LeaderLost } from "../state/ports.js";
import { type Db, inTransaction } from "./db.js";

export { LeaderLost };

/** Share of the lease after which a holder stops trusting it (its clock may run slower than the database's). */
const TRUST = 0.8;

export class PgLeaderLease implements LeaderLock {
  private term: number | undefined;
  /** performance.now() past which this process no longer counts itself the holder. */
  private trustedUntil = 0;

  constructor(
    private readonly db: Db,
    private readonly name: string,
    private readonly holder: string,
    private readonly leaseSeconds: number,
  ) {}

  get held(): boolean {
    return this.term !== undefined && performance.now() < this.trustedUntil;
  }

  /** Takes the lease if it lapsed (a new term), or renews this holder's; false when another holds it. */
  async hold(): Promise<boolean> {
    const asked = performance.now();
    const { rows } = await this.db.query(
      `INSERT INTO leader_leases AS l (name, holder, term, until) VALUES ($1, $2, 1, now() + make_interval(secs => $4))
       ON CONFLICT (name) DO UPDATE SET holder = $2, until = now() + make_interval(secs => $4),
         term = CASE WHEN l.holder = $2 AND l.term = $3 THEN l.term ELSE l.term + 1 END
       WHERE l.until < now() OR (l.holder = $2 AND l.term = $3)
       RETURNING term`,
      [this.name, this.holder, this.term ?? -1, this.leaseSeconds],
    );
    if (!rows[0]) {
      this.term = undefined;
      return false;
    }
    this.term = Number(rows[0].term);
    this.trustedUntil = asked + this.leaseSeconds * 1000 * TRUST;
    return true;
  }

  /** Takes the lease's row lock for the transaction (a takeover waits for it), or throws LeaderLost. */
  async fence(c: pg.PoolClient): Promise<void> {
    if (!this.held) throw new LeaderLost(this.name);
    const { rowCount } = await c.query(
      "SELECT 1 FROM leader_leases WHERE name = $1 AND holder = $2 AND term = $3 AND until > now() FOR SHARE",
      [this.name, this.holder, this.term],
    );
    if (!rowCount) {
      this.term = undefined;
      throw new LeaderLost(this.name);
    }
  }

  async release(): Promise<void> {
    const term = this.term;
    this.term = undefined;
    if (term === undefined) return;
    await this.db
      .query("UPDATE leader_leases SET until = now() - interval '1 second' WHERE name = $1 AND holder = $2 AND term = $3", [
        this.name,
        this.holder,
        term,
      ])
      .catch(() => undefined);
  }
}

/** The pool as the leader writes through it: every statement in a transaction that first checks the lease. */
export class LeaderDb implements Db {
  constructor(
    private readonly pool: Db,
    private readonly lease: PgLeaderLease,
  ) {}

  fence = (c: pg.PoolClient) => this.lease.fence(c);

  query(text: string, values?: unknown[]): Promise<pg.QueryResult> {
    return inTransaction(this, (c) => c.query(text, values));
  }

  connect(): Promise<pg.PoolClient> {
    return this.pool.connect();
  }
}
