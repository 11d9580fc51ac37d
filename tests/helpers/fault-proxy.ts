// A small HTTP proxy on 127.0.0.1 placed in front of a real upstream (llama-server) that injects faults into a
// share of the inference requests (POSTs), drawn from a seeded generator: 429 with and without Retry-After, 503, a reset
// connection, a slow answer. The rest are forwarded untouched. Counts what it did, so a test can check that
// every fault was met and survived.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { rng as seeded } from "../../testkit/fuzz.js";

export type Fault = "429-retry-after" | "429" | "503" | "reset" | "slow";

export interface FaultProxyOptions {
  /** The upstream's origin, e.g. http://127.0.0.1:8080. */
  target: string;
  /** Share of requests that get a fault (0..1), the faults drawn evenly from `faults`. */
  rate: number;
  faults: Fault[];
  /** How long a slow answer is held before it is forwarded. */
  slowMs?: number;
  /** The Retry-After a "429-retry-after" carries (default "0.2" seconds). */
  retryAfter?: string;
  /** Faults injected at most (default: no bound). */
  maxFaults?: number;
  seed?: number;
}

export interface FaultProxy {
  baseUrl: string;
  counts: Record<Fault | "forwarded", number>;
  /** When each POST arrived (performance.now()): a retry's wait is the gap between two. */
  posts: number[];
  /** Change the fault rate (0 stops the faults). */
  setRate(rate: number): void;
  close(): Promise<void>;
}

export async function startFaultProxy(opts: FaultProxyOptions): Promise<FaultProxy> {
  const random = seeded(opts.seed ?? 1);
  let rate = opts.rate;
  const counts: FaultProxy["counts"] = { "429-retry-after": 0, "429": 0, "503": 0, reset: 0, slow: 0, forwarded: 0 };
  const target = new URL(opts.target);
  const agent = new http.Agent({ keepAlive: true });

  const forward = (req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => {
    counts.forwarded++;
    const up = http.request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers, agent },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    up.end(body);
  };

  const posts: number[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      if (req.method === "POST") posts.push(performance.now());
      const body = Buffer.concat(chunks);
      const injected = counts["429-retry-after"] + counts["429"] + counts["503"] + counts.reset + counts.slow;
      // Only the inference calls (POST) are faulted: the service's GETs of the server's own routes (/props, /models)
      // are probes that fall back on their own, outside the retries these counts are checked against.
      const allowed = req.method === "POST" && injected < (opts.maxFaults ?? Number.POSITIVE_INFINITY);
      const fault = allowed && random() < rate ? opts.faults[Math.floor(random() * opts.faults.length)] : undefined;
      if (fault) counts[fault]++;
      const error = (status: number, headers: Record<string, string> = {}) => {
        res.writeHead(status, { "content-type": "application/json", ...headers });
        res.end(JSON.stringify({ error: { message: `injected ${status}`, type: "server_error", code: null } }));
      };
      switch (fault) {
        case "429-retry-after":
          return error(429, { "retry-after": opts.retryAfter ?? "0.2" });
        case "429":
          return error(429);
        case "503":
          return error(503);
        case "reset":
          return req.socket.destroy();
        case "slow":
          return void setTimeout(() => forward(req, body, res), opts.slowMs ?? 2_000);
        default:
          return forward(req, body, res);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    counts,
    posts,
    setRate(r) {
      rate = r;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}
