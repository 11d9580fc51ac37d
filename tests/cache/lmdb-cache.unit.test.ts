// The embedded result cache (LMDB in a folder) held to the ResultCache contract.
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { open } from "lmdb";
import { afterAll, describe, expect, it } from "vitest";
import { isLmdbCommitFailure, LmdbResultCache } from "../../cache/lmdb-cache.js";
import type { StoredAnswer } from "../../cache/port.js";
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

describe("the embedded store's recency", () => {
  const answer = (text: string): StoredAnswer => ({
    body: { object: "text_completion", choices: [{ text: text.repeat(500) }] },
    usage: { promptTokens: 1, completionTokens: 1, cachedTokens: 0 },
  });
  const writesOf = (d: string) => statSync(path.join(d, "data.mdb")).mtimeMs;

  it("makes a read entry recent once a minute at most: a read within the minute writes nothing and reorders nothing", async () => {
    let clock = 1_000_000;
    const d = path.join(root, "recency");
    const probe = new LmdbResultCache(path.join(root, "recency-probe"), { maxBytes: 1 << 30, ttlSeconds: 0 }, () => clock);
    await probe.put("s", "p", answer("p"));
    const one = (await probe.stats()).bytes;
    await probe.close();
    const c = new LmdbResultCache(d, { maxBytes: Math.floor(one * 3.5), ttlSeconds: 0 }, () => clock);
    for (const k of ["a", "b", "c"]) await c.put("s", k, answer(k));
    const before = writesOf(d);
    // Within the minute: answered, not moved, so "a" stays the oldest and goes first.
    clock += 59_000;
    expect(await c.get("s", "a")).toEqual(answer("a"));
    await c.close();
    expect(writesOf(d)).toBe(before);
    const again = new LmdbResultCache(d, { maxBytes: Math.floor(one * 3.5), ttlSeconds: 0 }, () => clock);
    await again.put("s", "d", answer("d"));
    expect(await again.get("s", "a")).toBeUndefined();
    // A minute after it was stored, a read moves "b" ahead of "c".
    clock += 1_000;
    expect(await again.get("s", "b")).toEqual(answer("b"));
    await again.put("s", "e", answer("e"));
    expect(await again.get("s", "c")).toBeUndefined();
    expect(await again.get("s", "b")).toEqual(answer("b"));
    await again.close();
  });
});

describe("lmdb's own rejections of a failed commit", () => {
  it("are told apart by lmdb's write code in their stack, in either of its builds, and nothing else is", () => {
    const failed = (stack: string) => Object.assign(new Error("Commit failed (see commitError for details)"), { stack });
    const at = (frames: string[]) => ["Error: Commit failed (see commitError for details)", ...frames.map((f) => `    at ${f}`)].join("\n");
    // As the process printed them on a full disk: the CommonJS bundle this store loads, and lmdb's ES modules.
    expect(
      isLmdbCommitFailure(
        failed(
          at([
            "rejectCommit (/app/node_modules/lmdb/dist/index.cjs:773:17)",
            "resolveWrites (/app/node_modules/lmdb/dist/index.cjs:735:40)",
          ]),
        ),
      ),
    ).toBe(true);
    expect(isLmdbCommitFailure(failed(at(["rejectCommit (file:///app/node_modules/lmdb/write.js:600:3)"])))).toBe(true);
    expect(isLmdbCommitFailure(failed(at(["get (/app/node_modules/lmdb/dist/index.cjs:1700:3)"])))).toBe(false);
    expect(isLmdbCommitFailure(failed(at(["put (/app/cache/lmdb-cache.js:90:3)"])))).toBe(false);
    expect(isLmdbCommitFailure("Commit failed")).toBe(false);
  });
});
