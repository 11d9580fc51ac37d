// Cross-process signals over PostgreSQL LISTEN/NOTIFY: a cancel or expiry reaches every worker within a second,
// new work wakes idle workers, a simulated spot reclaim reaches the spot workers. A notification can be missed
// (a connection lost), so each has a slower fallback: workers poll for work and read stop reasons with every
// heartbeat.
import pg from "pg";
import type pino from "pino";
import { OutageLog } from "../state/outage-log.js";
import type { ClusterEvent, EventBus } from "../state/ports.js";
import { type Db, pgClientConfig } from "./db.js";

export const CHANNEL = "obi_events";
const RECONNECT_MS = { first: 500, max: 10_000 };

export class PgEventBus implements EventBus {
  constructor(private readonly db: Db) {}

  async publish(event: ClusterEvent): Promise<void> {
    await this.db.query("SELECT pg_notify($1, $2)", [CHANNEL, JSON.stringify(event)]);
  }
}

/**
 * Listens on its own connection, reconnecting after a loss (a database restart) until closed, with a backoff up
 * to 10 s; an outage is logged when it starts and when it ends, not at every try.
 */
export function subscribe(url: string, logger: pino.Logger, onEvent: (e: ClusterEvent) => void): { close(): Promise<void> } {
  let closed = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  let backoff = RECONNECT_MS.first;
  const outage = new OutageLog(logger, "the database event connection");
  const connect = async () => {
    if (closed) return;
    const c = new pg.Client(pgClientConfig(url));
    client = c;
    const lost = (err?: Error) => {
      if (closed || client !== c) return;
      client = undefined;
      outage.failed(err);
      c.end().catch(() => undefined);
      retry = setTimeout(connect, backoff);
      retry.unref();
      backoff = Math.min(backoff * 2, RECONNECT_MS.max);
    };
    c.on("error", lost);
    c.on("end", () => lost());
    c.on("notification", (msg) => {
      try {
        onEvent(JSON.parse(msg.payload ?? ""));
      } catch (err) {
        logger.warn({ err, payload: msg.payload }, "ignoring an unreadable cluster event");
      }
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${CHANNEL}`);
      backoff = RECONNECT_MS.first;
      outage.ok();
      // Whatever was announced while disconnected is found by the fallbacks; a wake-up catches up on work now.
      onEvent({ type: "work" });
    } catch (err) {
      lost(err as Error);
    }
  };
  void connect();
  return {
    async close() {
      closed = true;
      clearTimeout(retry);
      await client?.end().catch(() => undefined);
    },
  };
}
