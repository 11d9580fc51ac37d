// The embedded result cache (LMDB in a folder) held to the ResultCache contract.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { open } from "lmdb";
import { afterAll } from "vitest";
import { LmdbResultCache } from "../../cache/lmdb-cache.js";
import { resultCacheContract } from "./result-cache-contract.js";

const root = mkdtempSync(path.join(tmpdir(), "obi-lmdb-cache-"));
let dir = "";
let n = 0;
afterAll(() => rmSync(root, { recursive: true, force: true }));

resultCacheContract("LMDB", false, () => ({
  async fresh() {
    dir = path.join(root, String(++n));
  },
  async open(limits, now) {
    return new LmdbResultCache(dir, limits, now);
  },
  async corrupt(scope, key) {
    const env = open({ path: dir, compression: false });
    const data = env.openDB<Buffer, string>({ name: "data", encoding: "binary" });
    const k = `${scope}\u0000${key}`;
    const sealed = Buffer.from(data.get(k) as Buffer);
    sealed[sealed.length - 2] ^= 0xff;
    await data.put(k, sealed);
    await env.close();
  },
}));
