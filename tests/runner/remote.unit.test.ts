// URL input and output of the offline runner against a real HTTP server on loopback.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { displayLocation, download, isUrl, upload } from "../../runner/remote.js";
import { type FileServer, startFileServer } from "../helpers/file-server.js";

const fast = { attempts: 3, baseDelayMs: 5 };
let srv: FileServer;
let dir: string;
beforeAll(async () => {
  srv = await startFileServer();
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-remote-"));
});
afterAll(async () => {
  await srv.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("runner URLs", () => {
  it("tells URLs from paths and hides a presigned URL's query", () => {
    expect(isUrl("https://bucket.example/in.jsonl")).toBe(true);
    expect(isUrl("HTTP://x/y")).toBe(true);
    expect(isUrl("./https.jsonl")).toBe(false);
    expect(displayLocation("https://b.example/o.jsonl?X-Amz-Signature=secret")).toBe("https://b.example/o.jsonl?…");
  });

  it("downloads to a file, retrying a 503", async () => {
    const body = Buffer.from('{"a":1}\n'.repeat(10_000));
    srv.objects.set("/big.jsonl", body);
    srv.failNext(2);
    const file = path.join(dir, "big.jsonl");
    expect(await download(`${srv.baseUrl}/big.jsonl`, file, { retry: fast })).toBe(body.length);
    expect(readFileSync(file).equals(body)).toBe(true);
  });

  it("gives up at once on a 404, with the status in the message", async () => {
    const before = srv.requests.length;
    await expect(download(`${srv.baseUrl}/missing.jsonl`, path.join(dir, "m"), { retry: fast })).rejects.toThrow(
      /GET .*missing\.jsonl failed: HTTP 404/,
    );
    expect(srv.requests.length - before).toBe(1);
  });

  it("gives up after the last try when the server keeps failing", async () => {
    srv.objects.set("/flaky.jsonl", Buffer.from("x\n"));
    srv.failNext(5);
    await expect(download(`${srv.baseUrl}/flaky.jsonl`, path.join(dir, "f"), { retry: fast })).rejects.toThrow(/after 3 tries: HTTP 503/);
    srv.failNext(0);
  });

  it("reports a refused connection", async () => {
    const gone = await startFileServer();
    await gone.close();
    await expect(download(`${gone.baseUrl}/x.jsonl`, path.join(dir, "r"), { retry: fast })).rejects.toThrow(
      /after 3 tries: .*ECONNREFUSED/,
    );
  });

  it("PUTs a file with its length declared, retrying a 503", async () => {
    const file = path.join(dir, "out.jsonl");
    writeFileSync(file, '{"custom_id":"a"}\n{"custom_id":"b"}\n');
    srv.failNext(1);
    await upload(file, `${srv.baseUrl}/results/out.jsonl?sig=abc`, { retry: fast });
    expect(srv.objects.get("/results/out.jsonl")?.toString()).toBe(readFileSync(file, "utf8"));
    const put = srv.requests.filter((r) => r.method === "PUT").at(-1)!;
    expect(put.url).toBe("/results/out.jsonl?sig=abc");
    expect(put.headers["content-length"]).toBe(String(readFileSync(file).length));
    expect(put.headers["transfer-encoding"]).toBeUndefined();
  });
});
