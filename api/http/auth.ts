// Bearer-key authentication. The owner of every object is a hash of the key that created it,
// so keys are never stored, and one key's files and batches are invisible to another.
import { createHash, timingSafeEqual } from "node:crypto";
import type { RequestHandler, Response } from "express";
import { ownerOf } from "../../domain/owner.js";
import type { Owner } from "../../domain/ports.js";
import { unauthorized } from "../errors.js";

export { ownerOf };

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

/**
 * Requires `Authorization: Bearer <key>` (or Anthropic's `x-api-key: <key>`) with one of `apiKeys`, and sets
 * res.locals.owner.
 * With no keys configured every request passes and the owner is null.
 */
export function requireApiKey(apiKeys: readonly string[]): RequestHandler {
  // Comparing fixed-length digests keeps the comparison constant-time whatever the key lengths.
  const known = apiKeys.map((key) => ({ digest: digest(key), owner: ownerOf(key) }));
  return (req, res, next) => {
    if (known.length === 0) {
      res.locals.owner = null;
      return next();
    }
    const bearer = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.get("authorization") ?? "")?.[1];
    const key = bearer ?? (req.get("authorization") === undefined ? req.get("x-api-key")?.trim() : undefined);
    if (!key) return next(unauthorized());
    const presented = digest(key);
    const hit = known.find((k) => timingSafeEqual(k.digest, presented));
    if (!hit) return next(unauthorized("Incorrect API key provided."));
    res.locals.owner = hit.owner;
    next();
  };
}

/** The owner set by requireApiKey (null when auth is off). */
export function ownerFrom(res: Response): Owner {
  return (res.locals.owner as Owner | undefined) ?? null;
}
