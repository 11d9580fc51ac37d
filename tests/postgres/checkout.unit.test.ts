// A server shutting down can end a new connection in the very packet that made it ready (PostgreSQL's fast stop
// sends "terminating connection" to every backend): the client then emits "error" before a promise's continuation
// runs, so a client handed over without a listener ended the process. Here a socket on loopback answers a
// connection's startup with "ready" and that error in one write, as such a server does.
import net from "node:net";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool, inTransaction, PgDb, unreachable } from "../../postgres/db.js";

/** One message of PostgreSQL's wire protocol from the server: its type, its length, its body. */
function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0);
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}

const field = (code: string, value: string) => Buffer.from(`${code}${value}\0`);
const READY_THEN_TERMINATED = Buffer.concat([
  message("R", Buffer.alloc(4)),
  message("Z", Buffer.from("I")),
  message(
    "E",
    Buffer.concat([
      field("S", "FATAL"),
      field("C", "57P01"),
      field("M", "terminating connection due to administrator command"),
      Buffer.alloc(1),
    ]),
  ),
]);

describe("a connection the server ends as it becomes ready", () => {
  let server: net.Server;
  let url = "";
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);

  beforeAll(async () => {
    server = net.createServer((socket) => {
      socket.on("error", () => undefined);
      socket.once("data", () => socket.end(READY_THEN_TERMINATED));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `postgres://u:p@127.0.0.1:${(server.address() as net.AddressInfo).port}/db`;
    process.on("uncaughtException", onUncaught);
  });
  afterAll(async () => {
    process.off("uncaughtException", onUncaught);
    await new Promise((resolve) => server.close(resolve));
  });

  it("fails the transaction as the database unavailable, and the process goes on", async () => {
    const pool = createPool(url, pino({ level: "silent" }), 2);
    try {
      // The ports query through PgDb; the result cache through the pool itself.
      for (const db of [new PgDb(pool), pool, new PgDb(pool)]) {
        const err = await inTransaction(db, (c) => c.query("SELECT 1")).catch((e: unknown) => e);
        expect(err).toMatchObject({ code: "database_unavailable" });
      }
      expect(uncaught).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it("reads a client that lost its connection as the database unreachable", () => {
    expect(unreachable(new Error("Client has encountered a connection error and is not queryable"))).toBe(true);
    expect(unreachable(new Error('relation "batches" does not exist'))).toBe(false);
  });
});
