// The listening server's limits: how long a client may take to send its headers or its whole request, how
// long a silent socket stays open, how long an answered one waits for its next request, how many connections
// are held at once (so descriptors stay in reserve for the batch files), and an OpenAI-shaped body on the errors
// Node's own HTTP parser answers.
import { readFileSync } from "node:fs";
import { type Server, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";

export interface ServerLimits {
  headersTimeoutSeconds: number;
  /** A whole request (an upload included) must arrive within this. */
  requestTimeoutSeconds: number;
  /** A socket with no traffic for this long is closed, whether or not a request began on it. */
  idleTimeoutSeconds: number;
  /** An answered connection waits this long for its next request. */
  keepAliveSeconds: number;
  /** 0: half the descriptor limit. */
  maxConnections: number;
}

/**
 * Half the process's descriptor limit (Linux's /proc/self/limits; 1,024 where it cannot be read): the rest
 * stays for batch files, uploads and the model, so clients can never starve persistence.
 */
export function defaultMaxConnections(limitsFile = "/proc/self/limits"): number {
  let soft = 1024;
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync(limitsFile, "utf8"));
    if (m) soft = Number(m[1]);
  } catch {
    // Not Linux: assume the common default.
  }
  return Math.max(16, Math.floor(soft / 2));
}

export function applyServerLimits(server: Server, limits: ServerLimits): void {
  server.headersTimeout = limits.headersTimeoutSeconds * 1000;
  server.requestTimeout = limits.requestTimeoutSeconds * 1000;
  // Node's own default (0) lets a socket that never sends a byte stay open for good.
  server.timeout = limits.idleTimeoutSeconds * 1000;
  // Node's default (5 s) equals httpx's and is within a second of what undici takes from the hint: a client sending on
  // a connection the server is closing in the same moment (a busy event loop makes it likely) reads ECONNRESET. Longer
  // than clients and load balancers keep an idle connection, it is theirs to close.
  server.keepAliveTimeout = limits.keepAliveSeconds * 1000;
  server.maxConnections = limits.maxConnections || defaultMaxConnections();
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(err, socket));
}

const LINGER_MS = 2_000;

const PARSER_ERRORS: Record<string, [number, string, string]> = {
  HPE_HEADER_OVERFLOW: [431, "The request's headers are too large.", "headers_too_large"],
  ERR_HTTP_REQUEST_TIMEOUT: [408, "The request did not arrive in time.", "request_timeout"],
  ERR_HTTP_HEADERS_TIMEOUT: [408, "The request's headers did not arrive in time.", "request_timeout"],
};

/** Node's default answers these with an empty body; clients get the same error shape as everywhere else. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, message, code] = PARSER_ERRORS[err.code ?? ""] ?? [400, "The request is not valid HTTP.", "bad_http_request"];
  const body = JSON.stringify({ error: { message, type: "invalid_request_error", param: null, code } });
  // The server's sockets allow half-open connections: after our FIN the descriptor stays until the client closes its
  // end, which a client that never reads (a silent socket held open) never does. It gets a moment to read the
  // answer, then the socket goes.
  const linger = setTimeout(() => socket.destroy(), LINGER_MS);
  linger.unref();
  socket.once("close", () => clearTimeout(linger));
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
