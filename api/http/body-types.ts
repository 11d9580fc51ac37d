// A request body's media type, checked before a byte of it is read: JSON wherever a route reads a body, and
// multipart/form-data only where the OpenAPI registry says the route takes files. A browser sends text/plain, a
// form's urlencoded body and multipart to another origin without asking first, so a JSON route that parsed them
// would take a write from any web page; anything else is a 415 saying what to send.
import type { Request, RequestHandler } from "express";
import { ApiError } from "../errors.js";

const JSON_TYPE = "application/json";
const MULTIPART_TYPE = "multipart/form-data";

/** Whether bytes follow the headers (a bodiless POST, such as a cancel, sends none, with or without a type). */
export const hasBody = (req: Pick<Request, "headers">): boolean =>
  req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;

/** A documented route, as the OpenAPI registry holds it (api/openapi.ts). */
export interface DocumentedRoute {
  method: string;
  path: string;
  request?: { body?: { content?: Record<string, unknown> } };
}

/** The routes whose documented request body is multipart/form-data: the uploads. */
export function takesFiles(routes: readonly DocumentedRoute[]): (req: Pick<Request, "method" | "path">) => boolean {
  const matchers = routes
    .filter((r) => r.request?.body?.content?.[MULTIPART_TYPE] !== undefined)
    .map((r) => {
      const pattern = r.path.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}/]+\}/g, "[^/]+");
      return { method: r.method.toUpperCase(), path: new RegExp(`^${pattern}$`) };
    });
  return (req) => matchers.some((r) => r.method === req.method && r.path.test(req.path));
}

const unsupported = (wanted: string, got: string | undefined) =>
  new ApiError(
    415,
    wanted === JSON_TYPE
      ? `This route reads a JSON body: send it with 'Content-Type: application/json'${got ? ` (not '${got.slice(0, 100)}')` : " (none was given)"}.`
      : `This route takes a file: send a multipart/form-data upload${got ? ` (not '${got.slice(0, 100)}')` : " (no Content-Type was given)"}.`,
    "invalid_request_error",
    "unsupported_media_type",
  );

/** Refuses (415) a body that is not JSON, or not multipart where `files` says the route takes files. */
export function requireBodyType(files: (req: Pick<Request, "method" | "path">) => boolean): RequestHandler {
  return (req, _res, next) => {
    if (!hasBody(req)) return next();
    // Mounted under a prefix ("/v1"), req.path is what follows it.
    const wanted = files({ method: req.method, path: req.baseUrl + req.path }) ? MULTIPART_TYPE : JSON_TYPE;
    next(req.is(wanted) ? undefined : unsupported(wanted, req.get("content-type")));
  };
}
