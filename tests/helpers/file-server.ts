// A tiny object store on 127.0.0.1 for the runner's URL input and output: GET serves what was put,
// PUT stores the body, and `failNext` makes the next requests answer 503 to exercise retries.
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

export interface FileServer {
  baseUrl: string;
  objects: Map<string, Buffer>;
  /** Every request seen: method, path (with query) and headers. */
  requests: Array<{ method: string; url: string; headers: IncomingHttpHeaders }>;
  /** The next `n` requests get a 503. */
  failNext(n: number): void;
  close(): Promise<void>;
}

export async function startFileServer(): Promise<FileServer> {
  const objects = new Map<string, Buffer>();
  const requests: FileServer["requests"] = [];
  let failures = 0;
  const server = createServer((req, res) => {
    const url = req.url ?? "/";
    const key = new URL(url, "http://x").pathname;
    requests.push({ method: req.method ?? "", url, headers: req.headers });
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (failures > 0) {
        failures--;
        res.writeHead(503).end("try again");
      } else if (req.method === "PUT") {
        objects.set(key, Buffer.concat(chunks));
        res.writeHead(200).end();
      } else if (req.method === "GET" && objects.has(key)) {
        res.writeHead(200, { "content-type": "application/jsonl" }).end(objects.get(key));
      } else {
        res.writeHead(404).end("no such object");
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    objects,
    requests,
    failNext: (n) => (failures = n),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
