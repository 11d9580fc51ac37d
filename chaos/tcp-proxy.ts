// A TCP proxy on 127.0.0.1 between one process and a server it depends on (PostgreSQL, the S3 server), which the
// nemesis uses to make the network misbehave: a partition, either silent (bytes in both directions vanish and new
// connections hang, as with a pulled cable: nothing is reset until it heals) or refusing (every connection reset at
// once and new ones refused, as when the server's host is up and its port closed), resets, delays, and a reply
// dropped after a chosen request was delivered (the request lands, its sender never hears).
import net from "node:net";

export interface TcpProxy {
  readonly port: number;
  /** Connections through it now. */
  readonly open: number;
  /** "silent": black-holes every connection, present and new; "refuse": resets them all and refuses new ones; until heal(). */
  partition(mode?: PartitionMode): void;
  /** Ends a partition (and disarms a reply drop): its connections are reset (their streams lost bytes), new ones pass. */
  heal(): void;
  /** Resets every connection now. */
  reset(): void;
  /** Holds each chunk this long before passing it on (0: none). */
  delay(ms: number): void;
  /**
   * The next time a client sends bytes containing `marker`, they are delivered and then everything is partitioned
   * for `partitionMs`: the request lands and its reply is lost. Resolves when that happened.
   */
  dropReplyTo(marker: string, partitionMs: number, mode?: PartitionMode): Promise<void>;
  close(): Promise<void>;
}

export type PartitionMode = "silent" | "refuse";

interface Pair {
  client: net.Socket;
  server: net.Socket;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let blackHole = false;
  let refusing = false;
  let delayMs = 0;
  let trap: { marker: Buffer; partitionMs: number; mode: PartitionMode; sprung: () => void } | undefined;
  let healTimer: NodeJS.Timeout | undefined;

  const cut = (p: Pair) => {
    p.client.destroy();
    p.server.destroy();
    pairs.delete(p);
  };
  const pass = (data: Buffer, to: net.Socket) => {
    if (blackHole) return;
    if (delayMs > 0) setTimeout(() => blackHole || to.write(data), delayMs);
    else to.write(data);
  };
  const partition = (mode: PartitionMode = "silent") => {
    blackHole = true;
    if (mode === "refuse") {
      refusing = true;
      for (const p of [...pairs]) cut(p);
    }
  };
  const heal = () => {
    clearTimeout(healTimer);
    // A reply drop armed but never sprung (no such request came) ends with the fault too.
    trap = undefined;
    refusing = false;
    if (!blackHole) return;
    blackHole = false;
    for (const p of [...pairs]) cut(p);
  };

  const server = net.createServer((client) => {
    if (refusing) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    const p: Pair = { client, server: upstream };
    pairs.add(p);
    let tail = Buffer.alloc(0);
    client.on("data", (data: Buffer) => {
      const t = trap;
      if (t && !blackHole) {
        // The marker may straddle two chunks: look at the end of the last one too.
        const seen = Buffer.concat([tail, data]);
        tail = seen.subarray(Math.max(0, seen.length - t.marker.length));
        if (seen.includes(t.marker)) {
          trap = undefined;
          upstream.write(data, () => {
            partition(t.mode);
            healTimer = setTimeout(heal, t.partitionMs);
            t.sprung();
          });
          return;
        }
      }
      pass(data, upstream);
    });
    upstream.on("data", (data: Buffer) => pass(data, client));
    const end = () => cut(p);
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    get open() {
      return pairs.size;
    },
    partition,
    heal,
    reset() {
      for (const p of [...pairs]) cut(p);
    },
    delay(ms) {
      delayMs = ms;
    },
    dropReplyTo(marker, partitionMs, mode = "silent") {
      return new Promise((sprung) => {
        trap = { marker: Buffer.from(marker), partitionMs, mode, sprung };
      });
    },
    async close() {
      clearTimeout(healTimer);
      for (const p of [...pairs]) cut(p);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The same URL with its host and port replaced by the proxy's. */
export function throughProxy(url: string, proxy: Pick<TcpProxy, "port">): string {
  const u = new URL(url);
  u.hostname = "127.0.0.1";
  u.port = String(proxy.port);
  return u.toString();
}
