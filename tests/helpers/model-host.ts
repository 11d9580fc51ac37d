// A model host on 127.0.0.1 that answers as Hugging Face does for what the downloads use (the manifest of
// hf:<owner>/<repo>:<quant>; /<owner>/<repo>/resolve/main/<file> redirecting to its storage, another host, with the
// file's size and sha256 in X-Linked-Size and X-Linked-Etag) and serves any other file by its path with a strong ETag,
// with ranges and If-Range (resumed downloads), a log of every request, a rate limit (data that flows for a while),
// and a stall after some bytes (a download to kill midway).
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, createServer as createNetServer } from "node:net";

export interface HostedRequest {
  method: string;
  path: string;
  range?: string;
  /** Whether it carried an Authorization header. */
  authorized: boolean;
  /** Bytes of the file's body sent in answer. */
  bytes: number;
}

export interface HostedFile {
  /** What the resolve URL's X-Linked-Etag announces (Hugging Face's sha256 of the file); default the body's own. */
  sha256?: string;
}

export interface ModelHost {
  /** http://127.0.0.1:<port> */
  url: string;
  /** Serves `body` at `path` (e.g. "/files/model.gguf" or "/Owner/Repo-GGUF/resolve/main/model-q8_0.gguf"). */
  put(path: string, body: Buffer, opts?: HostedFile): void;
  /** hf:<owner>/<repo>:<quant> resolves to `file` in that repository. */
  manifest(owner: string, repo: string, quant: string, file: string): void;
  requests: HostedRequest[];
  /** Bytes of file bodies (the downloads' transfers) sent so far. */
  bytesSent(): number;
  /** From now on, file bodies stop (their connections kept open, silent) once `bytes` more were sent; undefined: they go on. */
  stallAfter(bytes: number | undefined): void;
  /** File bodies sent at about this many bytes a second each; undefined: as fast as they go. */
  throttle(bytesPerSecond: number | undefined): void;
  close(): Promise<void>;
}

const PIECE = 16 * 1024;

export async function startModelHost(): Promise<ModelHost> {
  const files = new Map<string, { body: Buffer; sha256: string; claimed: string }>();
  const manifests = new Map<string, string>();
  const requests: HostedRequest[] = [];
  let sent = 0;
  let stall: number | undefined;
  let rate: number | undefined;
  const stalled = new Set<() => void>();
  let storageUrl = "";
  const answer = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://x");
    const entry: HostedRequest = {
      method: req.method ?? "GET",
      path: url.pathname,
      authorized: req.headers.authorization !== undefined,
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
    const path = decodeURIComponent(url.pathname);
    const storage = /^\/storage(\/.*)$/.exec(path);
    const file = files.get(storage ? storage[1] : path);
    if (!file) {
      res.writeHead(url.pathname === "/" ? 200 : 404, { "content-type": "text/plain" }).end(url.pathname === "/" ? "ok" : "not found");
      return;
    }
    // Hugging Face's resolve URL of an LFS file: a redirect to the storage host, the file's size and hash beside it.
    if (!storage && /^\/[^/]+\/[^/]+\/resolve\/main\//.test(path)) {
      res.writeHead(302, {
        location: `${storageUrl}/storage${url.pathname}`,
        "x-linked-etag": `"${file.claimed}"`,
        "x-linked-size": String(file.body.length),
        "x-repo-commit": "0".repeat(40),
        etag: `W/"${file.claimed.slice(0, 40)}"`,
      });
      res.end();
      return;
    }
    serveFile(req, res, file.body, `"${file.sha256}"`, entry);
  };
  const server: Server = createServer(answer);
  // The storage the resolve URLs redirect to, a host of its own as Hugging Face's CDN is.
  const storage: Server = createServer(answer);

  function serveFile(req: IncomingMessage, res: ServerResponse, body: Buffer, etag: string, entry: HostedRequest): void {
    const ifRange = req.headers["if-range"];
    const r = ifRange && ifRange !== etag ? null : /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
    const start = r ? Number(r[1]) : 0;
    const end = r?.[2] ? Math.min(Number(r[2]), body.length - 1) : body.length - 1;
    if (r && start >= body.length) {
      res.writeHead(416, { "content-range": `bytes */${body.length}` }).end();
      return;
    }
    const headers = {
      "accept-ranges": "bytes",
      etag,
      "content-type": "application/octet-stream",
      "content-length": String(end - start + 1),
    };
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
        let n = Math.min(PIECE, end + 1 - at);
        if (stall !== undefined) n = Math.min(n, stall - sent);
        // Stalled: the connection stays open and silent, as a dead network leaves it.
        if (n <= 0) {
          stalled.add(pump);
          return;
        }
        const ok = res.write(body.subarray(at, at + n));
        at += n;
        entry.bytes += n;
        sent += n;
        if (rate !== undefined) {
          setTimeout(pump, (n / rate) * 1000);
          return;
        }
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
  await new Promise<void>((resolve) => storage.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  storageUrl = `http://127.0.0.1:${(storage.address() as AddressInfo).port}`;
  return {
    url: `http://127.0.0.1:${port}`,
    put: (p, body, opts = {}) => {
      const sha256 = createHash("sha256").update(body).digest("hex");
      files.set(p, { body, sha256, claimed: opts.sha256 ?? sha256 });
    },
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
    throttle: (bytesPerSecond) => {
      rate = bytesPerSecond;
    },
    close: async () => {
      for (const s of [server, storage]) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
    },
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
