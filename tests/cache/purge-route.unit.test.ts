// DELETE /v1/cache on the embedded store: an admin forgets every answer or one key's (its shared cache_scope with it),
// a key that is not an admin's gets OpenAI's 403, an unknown parameter or key id a 400 naming it.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import express from "express";
import request from "supertest";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { requireApiKey } from "../../api/http/auth.js";
import { errorHandler } from "../../api/http/error-handler.js";
import { cacheRouter, purgeOf } from "../../api/routes/cache.js";
import { OPEN_SCOPE } from "../../cache/caching-backend.js";
import { LmdbResultCache } from "../../cache/lmdb-cache.js";
import { type ApiKey, KeyRing, loadKeys } from "../../config/keys.js";
import type { Organization } from "../../domain/usage.js";
import { writeKeysFile } from "../helpers/keys.js";

let dir: string;
let cache: LmdbResultCache;
let keys: ApiKey[];
let auth: Record<string, Record<string, string>>;
const answer = { body: { id: "chatcmpl-1", choices: [] }, usage: { promptTokens: 1, cachedTokens: 0, completionTokens: 1 } };

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-purge-"));
  cache = new LmdbResultCache(path.join(dir, "answers"), { maxBytes: 1 << 24, ttlSeconds: 0 });
  const written = writeKeysFile(dir, [{ id: "admin", admin: true }, { id: "a" }, { id: "b" }]);
  auth = written.auth;
  keys = loadKeys([], written.file);
});
afterEach(async () => {
  await cache.close();
  rmSync(dir, { recursive: true, force: true });
});

function app(withKeys: ApiKey[] = keys, on = true) {
  const ring = new KeyRing(withKeys);
  const org = { ownerOf: (id: string) => withKeys.find((k) => k.id === id)?.owner } as unknown as Organization;
  const a = express();
  a.use("/v1", requireApiKey(withKeys));
  a.use(cacheRouter(on ? purgeOf(cache, ring) : undefined, org));
  a.use(errorHandler({ maxFileBytes: 1 }));
  return a;
}

const scopeOf = (id: string) => new KeyRing(keys).cacheScopeOf(keys.find((k) => k.id === id)!.owner)!;

async function fill() {
  for (const id of ["a", "b"]) for (const k of ["k1", "k2"]) await cache.put(scopeOf(id), k, answer);
  await cache.put("runner", "k1", answer);
}

describe("DELETE /v1/cache", () => {
  it("an admin removes one key's answers with api_key_id, then all, saying how many", async () => {
    await fill();
    const one = await request(app()).delete("/v1/cache?api_key_id=a").set(auth.admin);
    expect(one.status, JSON.stringify(one.body)).toBe(200);
    expect(one.body).toEqual({ object: "result_cache.purge", api_key_id: "a", deleted: 2 });
    expect(await cache.get(scopeOf("a"), "k1")).toBeUndefined();
    expect(await cache.get(scopeOf("b"), "k1")).toBeDefined();
    const all = await request(app()).delete("/v1/cache").set(auth.admin);
    expect(all.body).toEqual({ object: "result_cache.purge", api_key_id: null, deleted: 3 });
    expect((await cache.stats()).entries).toBe(0);
  });

  it("a key that is not an admin's gets OpenAI's 403 and nothing is removed, its own scope included", async () => {
    await fill();
    for (const q of ["", "?api_key_id=a"]) {
      const res = await request(app()).delete(`/v1/cache${q}`).set(auth.a);
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ type: "permission_error", code: "insufficient_permissions" });
      expect(res.body.error.message).toMatch(/not an admin key.*purge the result cache/);
    }
    expect((await cache.stats()).entries).toBe(5);
    expect((await request(app()).delete("/v1/cache")).status).toBe(401);
  });

  it("an unknown parameter, a typo of api_key_id or an unknown key id is a 400 naming it, and removes nothing", async () => {
    await fill();
    const typo = await request(app()).delete("/v1/cache?api_key=a").set(auth.admin);
    expect(typo.status).toBe(400);
    expect(typo.body.error).toMatchObject({ code: "unknown_parameter", param: "api_key" });
    const unknown = await request(app()).delete("/v1/cache?api_key_id=nobody").set(auth.admin);
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ code: "invalid_api_key_id", param: "api_key_id" });
    const twice = await request(app()).delete("/v1/cache?api_key_id=a&api_key_id=b").set(auth.admin);
    expect(twice.status).toBe(400);
    expect(twice.body.error.param).toBe("api_key_id");
    expect((await cache.stats()).entries).toBe(5);
  });

  it("where the API is open its one scope is the open one; with the cache off a 400 says so", async () => {
    await cache.put(OPEN_SCOPE, "k", answer);
    const open = await request(app([])).delete("/v1/cache");
    expect(open.body).toMatchObject({ deleted: 1 });
    const off = await request(app(keys, false)).delete("/v1/cache").set(auth.admin);
    expect(off.status).toBe(400);
    expect(off.body.error).toMatchObject({ code: "result_cache_off" });
  });
});
