// The embedded cache's store before it is opened: one left open (a kill, a crash, a power cut) or written to since its
// clean close is read whole by a child first; a torn one (which would end this process with SIGSEGV or SIGBUS, or
// fail its start with MDB_CORRUPTED) is removed and the cache starts empty; an intact one keeps its answers; a
// clean stop leaves only a stamp to compare.

import { randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdtempSync, openSync, rmSync, statSync, truncateSync, writeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LmdbResultCache } from "../../cache/lmdb-cache.js";
import type { StoredAnswer } from "../../cache/port.js";

const root = mkdtempSync(path.join(os.tmpdir(), "obi-lmdb-check-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const limits = { maxBytes: 1 << 30, ttlSeconds: 0 };
const answer = (i: number): StoredAnswer => ({
  body: { text: `answer ${i} `.repeat(40) },
  usage: { promptTokens: 1, completionTokens: 1, cachedTokens: 0 },
});

/** An environment with 200 answers, closed cleanly. */
async function filled(name: string): Promise<string> {
  const dir = path.join(root, name);
  const cache = new LmdbResultCache(dir, limits);
  for (let i = 0; i < 200; i++) await cache.put("s", `k${i}`, answer(i));
  await cache.close();
  expect(existsSync(path.join(dir, "closed"))).toBe(true);
  return dir;
}

/** The same, then without the stamp a clean close writes, as a process that never closed it leaves it. */
async function leftOpen(name: string): Promise<string> {
  const dir = await filled(name);
  rmSync(path.join(dir, "closed"));
  return dir;
}

const tears: Record<string, (file: string) => void> = {
  "its meta pages zeroed": (file) => {
    const fd = openSync(file, "r+");
    writeSync(fd, Buffer.alloc(16384));
    closeSync(fd);
  },
  "cut short": (file) => truncateSync(file, 8192),
  "its pages after the meta pages scribbled on": (file) => {
    const fd = openSync(file, "r+");
    for (let at = 8192; at < statSync(file).size; at += 4096) writeSync(fd, randomBytes(200), 0, 200, at + 16);
    closeSync(fd);
  },
  "overwritten with garbage": (file) => {
    const fd = openSync(file, "r+");
    writeSync(fd, Buffer.alloc(statSync(file).size, 0x5a));
    closeSync(fd);
  },
};

describe("the embedded result cache's store before it is opened", () => {
  it("keeps an intact environment's answers, and a clean stop leaves nothing to check", async () => {
    const dir = await leftOpen("intact");
    const cache = new LmdbResultCache(dir, limits);
    expect(cache.damaged).toBeUndefined();
    expect(await cache.get("s", "k7")).toEqual(answer(7));
    expect((await cache.stats()).entries).toBe(200);
    expect(existsSync(path.join(dir, "closed"))).toBe(false);
    await cache.close();
    expect(existsSync(path.join(dir, "closed"))).toBe(true);
    // Closed cleanly and unchanged: nothing read beforehand (a stamp compared), its answers there.
    const again = new LmdbResultCache(dir, limits);
    expect(again.damaged).toBeUndefined();
    expect((await again.stats()).entries).toBe(200);
    await again.close();
  });

  // Damage after a clean close comes later than the close: a write within the same tick of the kernel's coarse clock
  // for file times (a few ms) would leave the size and modification time as stamped (cache/lmdb-check.ts).
  const later = () => new Promise((r) => setTimeout(r, 50));
  it.each(
    Object.keys(tears).flatMap((how) => [
      [how, "left open"],
      [how, "closed cleanly"],
    ]),
  )("starts empty, and says so, from an environment %s, %s", async (how, stop) => {
    const name = `${how}-${stop}`.replace(/\W+/g, "-");
    const dir = stop === "left open" ? await leftOpen(name) : await filled(name);
    await later();
    tears[how](path.join(dir, "data.mdb"));
    const cache = new LmdbResultCache(dir, limits);
    expect(cache.damaged).toMatch(
      /could not be read \((reading it ended with SIG[A-Z]+|.*(Error|MDB_).*)\): it was removed and starts empty/,
    );
    expect(await cache.get("s", "k7")).toBeUndefined();
    await cache.put("s", "again", answer(1));
    expect(await cache.get("s", "again")).toEqual(answer(1));
    expect((await cache.stats()).entries).toBe(1);
    await cache.close();
  });
});
