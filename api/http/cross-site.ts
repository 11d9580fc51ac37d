// What a browser sends for a web page of another origin is refused, unless CORS_ORIGINS names that origin. A page the
// user opens must not create, pause or cancel batches or run inference here, with keys or without (the open API on
// loopback is exactly what such a page would reach); preflights are answered for the listed origins only. Nor may
// such a page frame the console to steer clicks, nor, where there are no keys, reach the service by a name of its
// own pointed at this machine (DNS rebinding), which the browser would take for the page's own origin.
import { isIP } from "node:net";
import cors from "cors";
import type { RequestHandler } from "express";
import { ApiError } from "../errors.js";

/** Methods that change nothing here: a page of another site may send them, and the browser keeps it from the answer. */
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** The answer's headers a script of an allowed origin may read (the rest are CORS-safelisted). */
const EXPOSED = ["x-request-id", "retry-after", "x-output-through", "x-output-committed", "x-batch-status", "content-disposition"];

/**
 * Whether the browser says the request comes from a page of another origin. `Sec-Fetch-Site` is the browser's own
 * word and no script can set it; `same-site` counts too, since another port of this host is another origin. Browsers
 * that lack it still send `Origin` with every cross-origin write, compared here with the Host the request went to.
 * Clients that are not browsers (curl, the SDKs, an API server forwarding to a worker) send neither and pass.
 */
export function fromAnotherOrigin(req: { get(name: string): string | undefined }): boolean {
  const site = req.get("sec-fetch-site");
  if (site !== undefined) return site === "cross-site" || site === "same-site";
  const origin = req.get("origin");
  if (origin === undefined) return false;
  return origin === "null" || !URL.canParse(origin) || new URL(origin).host !== req.get("host");
}

const refused = (origin: string | undefined) =>
  new ApiError(
    403,
    `This request came from a web page of another site (${origin?.slice(0, 200) ?? "an unnamed origin"}), which may not call this ` +
      "service: only this service's own pages and the origins CORS_ORIGINS lists may.",
    "permission_error",
    "origin_not_allowed",
  );

/**
 * Refuses (403 `origin_not_allowed`) a state-changing request from another origin, and a preflight from one, unless
 * `allowedOrigins` lists it; for a listed origin, answers its preflight and adds the CORS headers to its answers.
 */
export function crossSiteGuard(allowedOrigins: readonly string[]): RequestHandler {
  const allowed = new Set(allowedOrigins);
  const withCors = cors({ origin: [...allowed], exposedHeaders: EXPOSED, maxAge: 600 });
  return (req, res, next) => {
    const origin = req.get("origin");
    if (origin !== undefined && allowed.has(origin)) return withCors(req, res, next);
    const preflight = req.method === "OPTIONS" && origin !== undefined && req.get("access-control-request-method") !== undefined;
    if (preflight || (!SAFE_METHODS.has(req.method) && fromAnotherOrigin(req))) return next(refused(origin));
    next();
  };
}

/** Whether a Host names this machine by address or as localhost, which no other site's page can be served from. */
function isLocalHost(hostname: string): boolean {
  const name = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return isIP(name) !== 0 || name === "localhost" || name.endsWith(".localhost");
}

/** Whether the server listens on loopback only, where no one reaches it by a name other than this machine's. */
export const loopbackOnly = (host: string): boolean => /^127\.|^::1$|^\[::1\]$|^localhost$/i.test(host);

/**
 * `guard` (an open API listening on loopback): refuses (403 `host_not_allowed`) a request sent to a name that is
 * neither an address, localhost nor the host of a listed origin. Such a server is reached only by those, so such a
 * name is a site's own, made to point at this machine: its pages would be same-origin with the answers and could
 * read and change everything the open API holds. (A browser sends no Sec-Fetch-Site to a plain-http name, so the
 * Host is all there is to go by.) With keys such a page has no key to send; on another interface, HOST says the
 * network may reach the service.
 */
export function rebindingGuard(guard: boolean, allowedOrigins: readonly string[]): RequestHandler {
  const named = new Set(allowedOrigins.map((o) => new URL(o).hostname));
  return (req, _res, next) => {
    if (!guard) return next();
    const host = req.get("host") ?? "";
    const hostname = URL.canParse(`http://${host}`) ? new URL(`http://${host}`).hostname : "";
    if (isLocalHost(hostname) || named.has(hostname)) return next();
    next(
      new ApiError(
        403,
        `This service has no API keys and listens on loopback, so it is reached by its address or localhost (or a host ` +
          `CORS_ORIGINS lists), not as '${host.slice(0, 200)}': a site's name pointed at this machine could otherwise ` +
          "read and change everything here.",
        "permission_error",
        "host_not_allowed",
      ),
    );
  };
}

/** No page of another origin may show this service's pages in a frame (and steer the user's clicks on them). */
export const noFraming: RequestHandler = (_req, res, next) => {
  res.setHeader("x-frame-options", "SAMEORIGIN");
  res.setHeader("content-security-policy", "frame-ancestors 'self'");
  next();
};
