// A key's result cache scope: its own by default, shared by the keys a keys file gives one cache_scope, refused
// when the name is not one.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkCacheMetadata } from "../../batches/cache-metadata.js";
import { batchCacheOptions, OPEN_SCOPE } from "../../cache/caching-backend.js";
import { KeyRing, keyEntryProblems, loadKeys, ownerOfSecret, sha256Hex } from "../../config/keys.js";

const root = mkdtempSync(path.join(tmpdir(), "obi-cache-scope-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("a key's result cache scope", () => {
  it("is the key's own unless the keys file names a cache several keys share", () => {
    const file = path.join(root, "keys.yaml");
    writeFileSync(
      file,
      [
        "keys:",
        `  - { id: eval-a, sha256: ${sha256Hex("sk-a")}, cache_scope: evals }`,
        `  - { id: eval-b, sha256: ${sha256Hex("sk-b")}, cache_scope: evals }`,
        `  - { id: solo, sha256: ${sha256Hex("sk-c")} }`,
      ].join("\n"),
    );
    const ring = new KeyRing(loadKeys(["sk-bare"], file));
    const [a, b, c, bare] = ["sk-a", "sk-b", "sk-c", "sk-bare"].map((s) => ring.cacheScopeOf(ownerOfSecret(s)));
    expect(a).toBe(b);
    expect(c).not.toBe(a);
    expect(bare).not.toBe(c);
    expect(ring.cacheScopeOf(null)).toBeNull();
  });

  it("refuses a cache_scope that is not a name", () => {
    expect(keyEntryProblems({ id: "x", sha256: sha256Hex("s"), cache_scope: "" })[0]).toMatch(/^cache_scope: must be 1-64/);
    expect(keyEntryProblems({ id: "x", sha256: sha256Hex("s"), cache_scope: "a b" })[0]).toMatch(/^cache_scope:/);
  });

  it("turns the cache off for a batch whose metadata says cache: off, and scopes the open API's batches together", () => {
    expect(batchCacheOptions("owner:1", { cache: "off" })).toEqual({ cacheScope: "owner:1", useCache: false });
    expect(batchCacheOptions(null, null)).toEqual({ cacheScope: OPEN_SCOPE, useCache: true });
  });

  it("refuses a batch's metadata.cache other than on or off, naming it", () => {
    expect(() => checkCacheMetadata({ cache: "off" })).not.toThrow();
    expect(() => checkCacheMetadata({ note: "x" })).not.toThrow();
    expect(() => checkCacheMetadata({ cache: "of" })).toThrow(/Invalid 'metadata.cache': "of" is not "on" or "off"/);
  });
});
