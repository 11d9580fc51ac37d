// A model's identity: a local file by its content, remembered per version of the file in a sidecar (a restart reads
// nothing again), a file changed under the same path another identity; an upstream by its base URLs and name.
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { fileDigest, upstreamIdentity } from "../../cache/model-identity.js";

const root = mkdtempSync(path.join(tmpdir(), "obi-model-identity-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const sha = (text: string) => createHash("sha256").update(text).digest("hex");

describe("a model's identity", () => {
  it("is a file's sha256, remembered in the sidecar for its version, and changes when the file does", async () => {
    const file = path.join(root, "model.gguf");
    const sidecar = path.join(root, "cache", "digests.json");
    writeFileSync(file, "weights one");
    expect(await fileDigest(file, sidecar)).toBe(sha("weights one"));
    const remembered = JSON.parse(readFileSync(sidecar, "utf8")) as Record<string, string>;
    expect(Object.values(remembered)).toEqual([sha("weights one")]);

    // The sidecar is what a restart reads: its digest is used for the same version of the file without reading it.
    writeFileSync(sidecar, JSON.stringify(Object.fromEntries(Object.keys(remembered).map((k) => [k, "from-the-sidecar"]))));
    expect(await fileDigest(file, sidecar)).toBe("from-the-sidecar");

    writeFileSync(file, "weights two");
    utimesSync(file, new Date(), new Date(Date.now() + 5000));
    expect(await fileDigest(file, sidecar)).toBe(sha("weights two"));
  });

  it("changes for a copy in place that keeps the size and restores the modification time (cp -p, rsync --inplace -t)", async () => {
    const file = path.join(root, "in-place.gguf");
    const sidecar = path.join(root, "in-place.json");
    const when = 1_700_000_000;
    writeFileSync(file, "weights AAAA");
    utimesSync(file, when, when);
    expect(await fileDigest(file, sidecar)).toBe(sha("weights AAAA"));
    await new Promise((r) => setTimeout(r, 20));
    writeFileSync(file, "weights BBBB");
    utimesSync(file, when, when);
    expect(statSync(file).mtimeMs).toBe(when * 1000);
    expect(await fileDigest(file, sidecar)).toBe(sha("weights BBBB"));
  });

  it("rebuilds a sidecar that cannot be read instead of trusting it", async () => {
    const file = path.join(root, "other.gguf");
    const sidecar = path.join(root, "broken.json");
    writeFileSync(file, "abc");
    writeFileSync(sidecar, "{not json");
    expect(await fileDigest(file, sidecar)).toBe(sha("abc"));
  });

  it("names an upstream by its base URLs in any order and its model", () => {
    expect(upstreamIdentity(["http://b:8000/v1/", "http://a:8000/v1"], "qwen")).toBe(
      upstreamIdentity(["http://a:8000/v1", "http://b:8000/v1"], "qwen"),
    );
    expect(upstreamIdentity(["http://a:8000/v1"], "qwen")).not.toBe(upstreamIdentity(["http://a:8000/v1"], "llama"));
    expect(upstreamIdentity(["http://a:8000/v1"], "qwen")).not.toBe(upstreamIdentity(["http://c:8000/v1"], "qwen"));
  });
});
