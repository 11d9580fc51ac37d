// Bearer-key authentication. The owner of every object is a hash of the key that created it,
// so keys are never stored, and one key's files and batches are invisible to another.
import { createHash, timingSafeEqual } from "node:crypto";
import type { Request, RequestHandler, Response } from "express";
import { type ApiKey, bareKey } from "../../config/keys.js";
import { ownerOf } from "../../domain/owner.js";
import type { Owner } from "../../domain/ports.js";
import type { Organization } from "../../domain/usage.js";
import { badRequest, forbidden, unauthorized } from "../errors.js";

export { ownerOf };

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

/**
 * Requires `Authorization: Bearer <key>` (or Anthropic's `x-api-key: <key>`) with one of `keys` (bare secrets are
 * API_KEYS'), and sets res.locals.owner and res.locals.key. With no keys every request passes, the owner is null,
 * and the caller may do what an admin may: the API is open.
 */
export function requireApiKey(keys: readonly (ApiKey | string)[]): RequestHandler {
  const keyOf = keyMatcher(keys);
  return (req, res, next) => {
    if (keys.length === 0) {
      res.locals.owner = null;
      res.locals.admin = true;
      return next();
    }
    const hit = keyOf(req);
    if (hit === null) return next(unauthorized());
    if (hit === undefined) return next(unauthorized(true));
    res.locals.owner = hit.owner;
    res.locals.key = hit;
    res.locals.admin = hit.admin;
    next();
  };
}

/**
 * The key a request presents (`Authorization: Bearer <key>`, or Anthropic's `x-api-key`): its ApiKey, undefined
 * for a key that is not one of `keys`, null where none is sent.
 */
export function keyMatcher(keys: readonly (ApiKey | string)[]): (req: Request) => ApiKey | undefined | null {
  // Comparing fixed-length digests keeps the comparison constant-time whatever the key lengths.
  const known = keys.map((k) => {
    const key = typeof k === "string" ? bareKey(k) : k;
    return { digest: Buffer.from(key.sha256, "hex"), key };
  });
  return (req) => {
    const bearer = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.get("authorization") ?? "")?.[1];
    const key = bearer ?? (req.get("authorization") === undefined ? req.get("x-api-key")?.trim() : undefined);
    if (!key) return null;
    const presented = digest(key);
    return known.find((k) => timingSafeEqual(k.digest, presented))?.key;
  };
}

/** Whether the caller may read every key's usage and batches: an admin key, or anyone where the API is open. */
export const isAdmin = (res: Response): boolean => res.locals.admin === true;

/**
 * Whose batches a read (or, with `action`, a pause or a resume) covers: the caller's own; an admin's, every key's
 * (undefined) or `apiKeyId`'s alone. Naming another key without being an admin is refused (403, naming the action),
 * naming no key there is is a 400.
 */
export function readScope(
  res: Response,
  apiKeyId: string | undefined,
  org?: Pick<Organization, "ownerOf">,
  action = "read",
): Owner | undefined {
  const own = ownerFrom(res);
  if (!isAdmin(res) || !org) {
    if (apiKeyId !== undefined && apiKeyId !== keyOf(res)?.id)
      throw forbidden(`Only an admin key may ${action} another key's batches: api_key_id '${apiKeyId}' is not this key's own.`);
    return own;
  }
  if (apiKeyId === undefined) return undefined;
  const owner = org.ownerOf(apiKeyId);
  if (owner === undefined) throw badRequest(`No API key has the id '${apiKeyId}'.`, "api_key_id", "invalid_api_key_id");
  return owner;
}

/** The caller's key; undefined where the API is open. */
export const keyOf = (res: Response) => res.locals.key as ApiKey | undefined;

/** Refuses (403) a caller whose key is not an admin key, saying what it asked to do. */
export const adminOnly =
  (action: string): RequestHandler =>
  (_req, res, next) =>
    next(isAdmin(res) ? undefined : forbidden(`The API key '${keyOf(res)?.id}' is not an admin key; only an admin key may ${action}.`));

/** The organization's usage, costs and keys. */
export const requireAdmin = adminOnly("read the organization's usage, costs and keys");

/**
 * The caller's own scope for what only a batch's own key may do (cancel it, retry it, read its results). An admin
 * reads every key's batches, so for one of another key's a 404 would be untrue: it is a 403 that says why.
 */
export async function ownBatchScope(
  batches: { get(id: string, owner: Owner | undefined): Promise<unknown> | unknown },
  res: Response,
  id: string,
  action: string,
): Promise<Owner> {
  const own = ownerFrom(res);
  if (isAdmin(res) && !(await batches.get(id, own)) && (await batches.get(id, undefined)))
    throw forbidden(`An admin key reads every key's batches but may ${action} only its own: batch '${id}' belongs to another key.`);
  return own;
}

/** The owner set by requireApiKey (null when auth is off). */
export function ownerFrom(res: Response): Owner {
  return (res.locals.owner as Owner | undefined) ?? null;
}
