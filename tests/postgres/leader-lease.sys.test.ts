// The maintenance's lease on PostgreSQL: one holder at a time, taken over with a higher term once it lapses, and
// an ex-holder's writes refused by the database (a takeover also waits for a write under way to commit).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../app/logger.js";
import { createPool, inTransaction, migrate } from "../../postgres/db.js";
import { LeaderDb, LeaderLost, PgLeaderLease } from "../../postgres/leader-lease.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE, startPostgres, type TestPostgres } from "../../testkit/postgres.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

describe.skipIf(!POSTGRES_BIN)("the maintenance's lease", () => {
  let server: TestPostgres;
  let db: ReturnType<typeof createPool>;

  beforeAll(async () => {
    server = await startPostgres();
    db = createPool(server.url, createLogger("silent"));
    await migrate(db, createLogger("silent"));
    await db.query("CREATE TABLE marks (who text)");
  }, 60_000);
  afterAll(async () => {
    await db?.end();
    server?.destroy();
  });

  it("survives the server going away while a transaction holds a client (the leader's every write is one)", async () => {
    // Unheard, the checked-out client's "error" event ended the process: two chaos workers died this way.
    const work = inTransaction(db, async (c) => {
      await c.query("SELECT 1");
      server.stop();
      await new Promise((r) => setTimeout(r, 500));
      await c.query("SELECT 1");
    });
    await expect(work).rejects.toMatchObject({ code: "database_unavailable" });
    server.start();
    await expect
      .poll(
        async () =>
          await db.query("SELECT 1").then(
            () => "up",
            () => "down",
          ),
        { timeout: 10_000 },
      )
      .toBe("up");
  });

  it("moves to another holder once it lapses, and refuses the old holder's writes", async () => {
    const a = new PgLeaderLease(db, "t", "a", 1);
    const b = new PgLeaderLease(db, "t", "b", 1);
    expect(await a.hold()).toBe(true);
    expect(await b.hold()).toBe(false);
    const asA = new LeaderDb(db, a);
    await asA.query("INSERT INTO marks VALUES ('a')");
    // a stops renewing (frozen): past its lease, b takes it over with a new term.
    await new Promise((r) => setTimeout(r, 1_200));
    expect(a.held).toBe(false);
    expect(await b.hold()).toBe(true);
    await expect(asA.query("INSERT INTO marks VALUES ('a-late')")).rejects.toBeInstanceOf(LeaderLost);
    // Even a holder that believes it still holds (its own clock wrong) is refused by the database's check.
    (a as any).trustedUntil = Number.POSITIVE_INFINITY;
    (a as any).term = 1;
    await expect(asA.query("INSERT INTO marks VALUES ('a-late')")).rejects.toBeInstanceOf(LeaderLost);
    expect(await a.hold()).toBe(false);
    await new LeaderDb(db, b).query("INSERT INTO marks VALUES ('b')");
    const { rows } = await db.query("SELECT who FROM marks ORDER BY who");
    expect(rows.map((r) => r.who)).toEqual(["a", "b"]);
    const lease = await db.query("SELECT holder, term FROM leader_leases WHERE name = 't'");
    expect(lease.rows[0]).toMatchObject({ holder: "b", term: "2" });
    // A release hands it over at once.
    await b.release();
    expect(await a.hold()).toBe(true);
  });
});
