// A model host on 127.0.0.1 that answers as Hugging Face does for what the downloads use (the manifest of
// hf:<owner>/<repo>:<quant>, /<owner>/<repo>/resolve/main/<file>) and serves any other file by its path, with
// ranges (resumed downloads), a log of every request, and a stall after some bytes (a download to kill midway).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, createServer as createNetServer } from "node:net";

export interface HostedRequest {
  method: string;
  path: string;
  range?: string;
  /** Bytes of the file's body sent in answer. */
  bytes: number;
}

export interface ModelHost {
  /** http://127.0.0.1:<port> */
  url: string;
  /** Serves `body` at `path` (e.g. "/files/model.gguf" or "/Owner/Repo-GGUF/resolve/main/model-q8_0.gguf"). */
  put(path: string, body: Buffer): void;
  /** hf:<owner>/<repo>:<quant> resolves to `file` in that repository. */
  manifest(owner: string, repo: string, quant: string, file: string): void;
  requests: HostedRequest[];
  /** Bytes of ranged file bodies (the downloads' transfers) sent so far. */
  bytesSent(): number;
  /** From now on, ranged file bodies stop (their connections kept open, silent) once `bytes` more were sent; undefined: they go on. */
  stallAfter(bytes: number | undefined): void;
  close(): Promise<void>;
}

export async function startModelHost(): Promise<ModelHost> {
  const files = new Map<string, Buffer>();
  const manifests = new Map<string, string>();
  const requests: HostedRequest[] = [];
  let sent = 0;
  let stall: number | undefined;
  const stalled = new Set<() => void>();
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const entry: HostedRequest = {
      method: req.method ?? "GET",
      path: url.pathname,
      bytes: 0,
      ...(req.headers.range ? { range: req.headers.range } : {}),
    };
    requests.push(entry);
    const m = /^\/v2\/([^/]+)\/([^/]+)\/manifests\/([^/]+)$/.exec(url.pathname);
    if (m) {
      const file = manifests.get(`${m[1]}/${m[2]}:${m[3].toUpperCase()}`);
      res.writeHead(file ? 200 : 404, { "content-type": "application/json" });
      res.end(JSON.stringify(file ? { ggufFile: { rfilename: file } } : { error: "not found" }));
      return;
    }
    const body = files.get(decodeURIComponent(url.pathname));
    if (!body) {
      res.writeHead(url.pathname === "/" ? 200 : 404, { "content-type": "text/plain" }).end(url.pathname === "/" ? "ok" : "not found");
      return;
    }
    serveFile(req, res, body, entry);
  });

  function serveFile(req: IncomingMessage, res: ServerResponse, body: Buffer, entry: HostedRequest): void {
    const r = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
    const start = r ? Number(r[1]) : 0;
    const end = r?.[2] ? Math.min(Number(r[2]), body.length - 1) : body.length - 1;
    const headers = { "accept-ranges": "bytes", "content-type": "application/octet-stream", "content-length": String(end - start + 1) };
    if (r) res.writeHead(206, { ...headers, "content-range": `bytes ${start}-${end}/${body.length}` });
    else res.writeHead(200, headers);
    if (req.method === "HEAD") {
      res.end();
      return;
    }
    let at = start;
    const pump = () => {
      while (at <= end) {
        if (res.destroyed) return;
        let n = Math.min(64 * 1024, end + 1 - at);
        // Only ranged transfers stall: a plain GET is how a downloader asks for the size before it starts.
        if (stall !== undefined && r) n = Math.min(n, stall - sent);
        // Stalled: the connection stays open and silent, as a dead network leaves it.
        if (n <= 0) {
          stalled.add(pump);
          return;
        }
        const ok = res.write(body.subarray(at, at + n));
        at += n;
        entry.bytes += n;
        if (r) sent += n;
        if (!ok) {
          res.once("drain", pump);
          return;
        }
      }
      res.end();
    };
    pump();
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    put: (p, body) => files.set(p, body),
    manifest: (owner, repo, quant, file) => {
      manifests.set(`${owner}/${repo}:${quant.toUpperCase()}`, file);
    },
    requests,
    bytesSent: () => sent,
    stallAfter: (bytes) => {
      stall = bytes === undefined ? undefined : sent + bytes;
      if (bytes !== undefined) return;
      const waiting = [...stalled];
      stalled.clear();
      for (const pump of waiting) pump();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port on 127.0.0.1 nothing listens on (a host that cannot be reached). */
export function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createNetServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
