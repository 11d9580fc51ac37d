// One log line per request, tagged with a request id the client can quote back to us.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type pino from "pino";
import { type HttpLogger, pinoHttp } from "pino-http";

/** A client-sent id is reused only if it is short and plain, so it cannot forge log lines or headers. */
const CLIENT_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestId(req: IncomingMessage, res: ServerResponse): string {
  const sent = req.headers["x-request-id"];
  const id = typeof sent === "string" && CLIENT_ID.test(sent) ? sent : `req_${randomUUID().replace(/-/g, "")}`;
  res.setHeader("x-request-id", id);
  return id;
}

// Headers are logged by allow-list: Authorization, cookies and any other credential-bearing
// header never reach a log line, whatever header name a client puts its key in.
const LOGGED_HEADERS = ["user-agent", "content-type", "content-length", "x-request-id"];

function serializeRequest(req: { id?: unknown; method?: string; url?: string; headers?: Record<string, unknown>; remoteAddress?: string }) {
  const headers: Record<string, unknown> = {};
  for (const name of LOGGED_HEADERS) if (req.headers?.[name] !== undefined) headers[name] = req.headers[name];
  return {
    id: req.id,
    method: req.method,
    url: req.url === undefined ? undefined : redactUrl(req.url),
    headers,
    remoteAddress: req.remoteAddress,
  };
}

/** A query parameter whose name says it carries a credential: `api_key`, `key`, `access_token`, `secret`, `sig`… */
const SECRET_NAME = /key|token|secret|passw|auth|sig|credential|session|cookie/i;
/** A value that is a credential whatever its parameter is called: an Authorization header's, or a key's own shape. */
const SECRET_VALUE = /^\s*(bearer|basic|token)\s+\S|^(sk|pk|rk|whsec)[-_][A-Za-z0-9]/i;
const REDACTED = "[redacted]";
/** What names a key without holding it (`api_key_id`, an admin's filter): kept. */
const IDENTIFIER = /(^|_)ids?$/i;

/**
 * The URL as the log keeps it: the value of every query parameter that names or holds a credential replaced, so a
 * client that sends its key in the query string (refused, but sent) never has it written down.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf("?");
  const path = (q < 0 ? url : url.slice(0, q))
    .split("/")
    .map((segment) => (SECRET_VALUE.test(decoded(segment)) ? REDACTED : segment))
    .join("/");
  if (q < 0) return path;
  const kept = url
    .slice(q + 1)
    .split("&")
    .map((pair) => {
      const eq = pair.indexOf("=");
      const name = decoded(eq < 0 ? pair : pair.slice(0, eq));
      const value = decoded(eq < 0 ? "" : pair.slice(eq + 1));
      const secretName = SECRET_NAME.test(name) && !IDENTIFIER.test(name);
      return secretName || SECRET_VALUE.test(value) ? `${eq < 0 ? pair : pair.slice(0, eq)}=${REDACTED}` : pair;
    });
  return `${path}?${kept.join("&")}`;
}

function decoded(part: string): string {
  try {
    return decodeURIComponent(part.replace(/\+/g, " "));
  } catch {
    return part;
  }
}

/**
 * Health checks, metrics scrapes, the console polling itself, and the console's and the docs' assets: most of a log's lines
 * and none of its news, so they log at debug (a failure still logs at warn or error).
 */
const POLLED = new Set(["/", "/health", "/ready", "/metrics", "/status.json", "/console.js", "/console.css", "/favicon.ico"]);
function isPolling(req: IncomingMessage): boolean {
  if (req.method !== "GET" && req.method !== "HEAD") return false;
  const path = (req.url ?? "").split("?")[0];
  return (
    POLLED.has(path) ||
    path === "/docs" ||
    path.startsWith("/docs/") ||
    path === "/openapi.json" ||
    path.startsWith("/console/api/") ||
    path.startsWith("/assets/")
  );
}

/**
 * A 5xx that says when to come back (503 with Retry-After: the database or the store away, a start, a stop) is the
 * service working as it should; what caused it is logged once, when it starts and ends (state/outage-log.ts), so
 * each request refused meanwhile is a warning, not an error (a 20 s outage was 233 error lines per API server).
 */
const refusedForNow = (res: ServerResponse) => res.statusCode >= 500 && res.getHeader("retry-after") !== undefined;

export function requestLogger(logger: pino.Logger): HttpLogger {
  return pinoHttp({
    logger,
    genReqId: requestId,
    // Every line logged for a request (req.log and the access line) carries a top-level req_id to grep for.
    quietReqLogger: true,
    customAttributeKeys: { reqId: "req_id" },
    serializers: { req: serializeRequest },
    // Belt and braces for anything else that logs a raw request object through this child logger.
    redact: { paths: ["req.headers.authorization", "req.headers.cookie", 'req.headers["x-api-key"]'], censor: "[redacted]" },
    customLogLevel: (req, res, err) =>
      refusedForNow(res)
        ? "warn"
        : err || res.statusCode >= 500
          ? "error"
          : res.statusCode >= 400
            ? "warn"
            : isPolling(req)
              ? "debug"
              : "info",
  });
}
