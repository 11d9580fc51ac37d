// The staging transfer's resume point is what was synced, for the version synced: bytes past it (never synced) and a
// staging file without a record (another tool's, an earlier release's) are not trusted, a record of another version
// is dropped, a host that ignores the range or whose file changed sends it whole, a connection that goes silent is
// resumed on another; each time the file ends byte-identical to the source.
import { createHash, randomBytes } from "node:crypto";
import { readFile, stat, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { RemoteFile } from "../../engine/load/model-source.js";
import { RECORD_SUFFIX, TransferError, transfer } from "../../engine/load/model-transfer.js";
import { type ModelHost, startModelHost } from "../helpers/model-host.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("model-transfer");
const body = randomBytes(3 * 1024 * 1024 + 123);
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const etag = `"${sha(body)}"`;
let host: ModelHost;

beforeAll(async () => {
  host = await startModelHost();
  host.put("/f/m.gguf", body);
});
afterAll(() => host.close());
afterEach(() => {
  host.stallAfter(undefined);
  host.throttle(undefined);
});

const src = (over: Partial<RemoteFile> = {}): RemoteFile => ({
  url: `${host.url}/f/m.gguf`,
  headers: {},
  size: body.length,
  version: etag,
  ...over,
});
const record = (synced: number, over: object = {}) => JSON.stringify({ size: body.length, sha256: null, version: etag, synced, ...over });
const rangesAsked = (since: number) => host.requests.slice(since).map((r) => r.range ?? "whole");

describe("transfer", () => {
  it("goes on from the synced point only: bytes past it were never synced and are fetched again", async () => {
    const part = await scratch.file("a.part");
    const junk = Buffer.concat([body.subarray(0, 1_000_000), Buffer.alloc(500_000, 0xee)]);
    await writeFile(part, junk);
    await writeFile(part + RECORD_SUFFIX, record(1_000_000));
    const before = host.requests.length;
    const resumed: number[] = [];
    const got = await transfer(src(), part, { onResume: (b) => resumed.push(b) });
    expect(resumed).toEqual([1_000_000]);
    expect(rangesAsked(before)).toEqual(["bytes=1000000-"]);
    expect(got).toEqual({ bytes: body.length, sha256: sha(body) });
    expect((await readFile(part)).equals(body)).toBe(true);
  });

  it("trusts nothing of a staging file without a record, nor of one recorded for another version", async () => {
    for (const rec of [undefined, record(2_000_000, { version: '"another"' }), record(2_000_000, { size: body.length + 1 })]) {
      const part = await scratch.file("b.part");
      await writeFile(part, Buffer.alloc(body.length, 0x11));
      if (rec) await writeFile(part + RECORD_SUFFIX, rec);
      const before = host.requests.length;
      const got = await transfer(src(), part);
      expect(rangesAsked(before)).toEqual(["whole"]);
      expect(got.sha256).toBe(sha(body));
      expect((await readFile(part)).equals(body)).toBe(true);
    }
  });

  it("fetches the file whole where the host's file changed since the kept part (If-Range) or the host ignores ranges", async () => {
    const part = await scratch.file("c.part");
    await writeFile(part, Buffer.alloc(1_000_000, 0x22));
    // The record and the resolution agree on a version the host no longer has: If-Range makes it send the whole file.
    await writeFile(part + RECORD_SUFFIX, record(1_000_000, { version: '"old"' }));
    const got = await transfer(src({ version: '"old"' }), part);
    expect(got.sha256).toBe(sha(body));

    const plain = createServer((req, res) => {
      res.writeHead(200, { "content-length": String(body.length) });
      res.end(req.method === "HEAD" ? undefined : body);
    });
    await new Promise<void>((r) => plain.listen(0, "127.0.0.1", r));
    try {
      const other = await scratch.file("d.part");
      await writeFile(other, Buffer.alloc(1_000_000, 0x33));
      await writeFile(other + RECORD_SUFFIX, record(1_000_000, { version: null }));
      const url = `http://127.0.0.1:${(plain.address() as AddressInfo).port}/m.gguf`;
      const whole = await transfer({ url, headers: {}, size: body.length }, other);
      expect(whole.sha256).toBe(sha(body));
      expect((await readFile(other)).equals(body)).toBe(true);
    } finally {
      plain.closeAllConnections();
      plain.close();
    }
  });

  it("resumes over a new connection where one goes silent, within the same run", async () => {
    const part = await scratch.file("e.part");
    host.stallAfter(1_500_000);
    const before = host.requests.length;
    const run = transfer(src(), part, { idleMs: 300 });
    // The silence drops the first connection; the second asks for the rest once the host goes on.
    await new Promise((r) => setTimeout(r, 1000));
    host.stallAfter(undefined);
    const got = await run;
    expect(got.sha256).toBe(sha(body));
    const ranges = rangesAsked(before);
    expect(ranges[0]).toBe("whole");
    expect(ranges.slice(1).some((r) => /^bytes=[1-9]\d*-$/.test(r))).toBe(true);
  });

  it("when stopped, keeps what reached the disk and records it, every recorded byte the source's", async () => {
    const part = await scratch.file("f.part");
    host.throttle(2 * 1024 * 1024);
    const stop = new AbortController();
    const run = transfer(src(), part, {
      signal: stop.signal,
      syncMs: 100,
      onProgress: (b) => b > 1_200_000 && stop.abort(new Error("stop")),
    });
    await expect(run).rejects.toThrow("stop");
    const rec = JSON.parse(await readFile(part + RECORD_SUFFIX, "utf8"));
    expect(rec.synced).toBeGreaterThan(1_200_000);
    expect((await stat(part)).size).toBe(rec.synced);
    expect((await readFile(part)).equals(body.subarray(0, rec.synced))).toBe(true);
  });

  it("refuses a host that answers an error in one line, retrying only what another attempt may mend", async () => {
    const part = await scratch.file("g.part");
    const err = await transfer(src({ url: `${host.url}/f/none.gguf` }), part).catch((e: Error) => e);
    expect(err).toBeInstanceOf(TransferError);
    expect((err as TransferError).retryable).toBe(false);
    expect((err as Error).message).toMatch(/^127\.0\.0\.1:\d+ answered 404 Not Found$/);
  });
});
