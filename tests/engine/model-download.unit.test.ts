// Models named by hf: or a URL, fetched from a local host that answers as Hugging Face does: downloaded once with
// progress, found again without the network, checked before they are kept (a sha256 other than Hugging Face's or the
// URL's, a cut or non-GGUF file are refused in one line and never land in the models folder), one line when the host
// cannot be reached, one download at a time.
import { createHash } from "node:crypto";
import { mkdir, open, readdir, readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { modelFileName, parseModelRef } from "../../config/model-ref.js";
import { writeGeneratedModel } from "../../engine/load/generated-model.js";
import { checkGgufFile, ModelFileError } from "../../engine/load/gguf-check.js";
import {
  type DownloadStatus,
  fetchModel,
  ModelDownloadError,
  PART_SUFFIX,
  progressLine,
  STAGING_FOLDER,
} from "../../engine/load/model-download.js";
import { RECORD_SUFFIX } from "../../engine/load/model-transfer.js";
import { closedPort, type ModelHost, startModelHost } from "../helpers/model-host.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("model-download");
let host: ModelHost;
let model: Buffer;
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
/** The model with bytes flipped in the middle: its size and header intact, so only its hash tells it apart. */
const flipped = () => {
  const b = Buffer.from(model);
  for (let i = 0; i < 64; i++) b[Math.floor(b.length / 2) + i] ^= 0xff;
  return b;
};

beforeAll(async () => {
  const file = await scratch.file("tiny.gguf");
  await writeGeneratedModel(file, { preset: "tiny" });
  model = await readFile(file);
  host = await startModelHost();
  host.put("/files/tiny.gguf", model);
  host.put("/Owner/Tiny-GGUF/resolve/main/tiny-q8_0.gguf", model);
  host.manifest("Owner", "Tiny-GGUF", "Q8_0", "tiny-q8_0.gguf");
  host.put("/files/cut.gguf", model.subarray(0, Math.floor(model.length * 0.6)));
  host.put("/files/page.gguf", Buffer.from("<!DOCTYPE html><html><body>Sign in to continue</body></html>"));
  // A storage host that serves other bytes than those whose hash Hugging Face gives (a bad mirror, a flipped bit).
  host.put("/Owner/Bad-GGUF/resolve/main/bad-q8_0.gguf", flipped(), { sha256: sha(model) });
  host.manifest("Owner", "Bad-GGUF", "Q8_0", "bad-q8_0.gguf");
  host.put("/Owner/Slow-GGUF/resolve/main/slow-q8_0.gguf", model);
  host.manifest("Owner", "Slow-GGUF", "Q8_0", "slow-q8_0.gguf");
});
afterAll(() => host.close());
// A test that fails while the host stalls must not leave the next ones stalled.
afterEach(() => host.stallAfter(undefined));

const modelsDir = async () => path.dirname(await scratch.file("models/x"));
const requestsFor = (p: string) => host.requests.filter((r) => r.path.includes(p));
const oneLine = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => undefined,
    (e: Error) => e,
  );
  expect(err, "the promise rejects").toBeInstanceOf(Error);
  expect(err!.message).not.toContain("\n");
  return err!;
};

describe("fetchModel", () => {
  it("downloads hf:<owner>/<repo>:<quant> once into the models folder, with progress, and finds it again without the host", async () => {
    const dir = await modelsDir();
    const statuses: DownloadStatus[] = [];
    const logs: string[] = [];
    const opts = { dir, hfEndpoint: host.url, onStatus: (s: DownloadStatus) => statuses.push(s), log: (m: string) => logs.push(m) };
    const file = await fetchModel("hf:Owner/Tiny-GGUF:q8_0", opts);
    expect(path.dirname(file)).toBe(dir);
    expect((await readFile(file)).equals(model)).toBe(true);
    expect(requestsFor("/v2/Owner/Tiny-GGUF/manifests/Q8_0").length).toBeGreaterThan(0);
    const downloading = statuses.filter((s) => s.state === "downloading");
    expect(downloading.length).toBeGreaterThan(0);
    expect(downloading.at(-1)).toMatchObject({ model: "hf:Owner/Tiny-GGUF:Q8_0", totalBytes: model.length, file: path.basename(file) });
    expect(statuses.at(-1)).toMatchObject({ state: "done", bytes: model.length });
    expect(logs.some((l) => /^downloading hf:Owner\/Tiny-GGUF:Q8_0 \[#+\] 100% /.test(l))).toBe(true);
    expect(logs.at(-1)).toBe(`downloaded hf:Owner/Tiny-GGUF:Q8_0 into ${file} (sha256 ${sha(model)}, checked against Hugging Face's)`);
    // Only the checked file is left: no staging copy, no lock.
    expect(await readdir(path.join(dir, STAGING_FOLDER))).toEqual([]);

    const before = host.requests.length;
    expect(await fetchModel("hf:Owner/Tiny-GGUF:Q8_0", { ...opts, hfEndpoint: "http://127.0.0.1:9" })).toBe(file);
    expect(host.requests.length).toBe(before);
  });

  it("sends HF_TOKEN to the Hugging Face endpoint only, never to the storage it redirects to", async () => {
    const dir = await modelsDir();
    const before = host.requests.length;
    await fetchModel("hf:Owner/Slow-GGUF:Q8_0", { dir, hfEndpoint: host.url, hfToken: "hf_secret" });
    const seen = host.requests.slice(before);
    expect(seen.filter((r) => !r.path.startsWith("/storage/")).every((r) => r.authorized)).toBe(true);
    const storage = seen.filter((r) => r.path.startsWith("/storage/"));
    expect(storage.length).toBeGreaterThan(0);
    expect(storage.some((r) => r.authorized)).toBe(false);
  });

  it("downloads a URL of a .gguf, and keeps two references apart", async () => {
    const dir = await modelsDir();
    const a = await fetchModel(`${host.url}/files/tiny.gguf`, { dir });
    const b = await fetchModel("hf:Owner/Tiny-GGUF:Q8_0", { dir, hfEndpoint: host.url });
    expect(a).not.toBe(b);
    expect((await stat(a)).size).toBe(model.length);
  });

  it.each([
    ["cut short", "/files/cut.gguf", /cut\.gguf: is cut short: its tensors need \d+ bytes and the file has \d+$/],
    ["not a GGUF", "/files/page.gguf", /page\.gguf: is not a GGUF model \(it begins with '<!DOCTYPE html><html><bo'\)$/],
  ])("refuses a file that is %s in one line, and keeps nothing of it", async (_what, file, why) => {
    const dir = await modelsDir();
    const err = await oneLine(fetchModel(`${host.url}${file}`, { dir }));
    expect(err).toBeInstanceOf(ModelFileError);
    expect(err.message).toMatch(why);
    expect((await readdir(dir)).filter((f) => f !== STAGING_FOLDER)).toEqual([]);
    expect(await readdir(path.join(dir, STAGING_FOLDER))).toEqual([]);
  });

  it("refuses a file whose sha256 is not the one Hugging Face gives, though its size and header are right, and keeps nothing", async () => {
    const dir = await modelsDir();
    const err = await oneLine(fetchModel("hf:Owner/Bad-GGUF:Q8_0", { dir, hfEndpoint: host.url }));
    expect(err).toBeInstanceOf(ModelFileError);
    expect(err.message).toBe(
      `hf:Owner/Bad-GGUF:Q8_0: its sha256 is ${sha(flipped())} where Hugging Face gives ${sha(model)}; the download was deleted, the next start downloads it again`,
    );
    expect((await readdir(dir)).filter((f) => f !== STAGING_FOLDER)).toEqual([]);
    expect((await readdir(path.join(dir, STAGING_FOLDER))).filter((f) => !f.endsWith(".lock"))).toEqual([]);
  });

  it("checks a URL's download against its #sha256, and refuses another hash in one line", async () => {
    const dir = await modelsDir();
    const logs: string[] = [];
    const file = await fetchModel(`${host.url}/files/tiny.gguf#sha256=${sha(model).toUpperCase()}`, { dir, log: (m) => logs.push(m) });
    expect((await readFile(file)).equals(model)).toBe(true);
    expect(logs.at(-1)).toMatch(/\(sha256 [0-9a-f]{64}, checked against the URL's #sha256's\)$/);
    const other = sha(flipped());
    const err = await oneLine(fetchModel(`${host.url}/files/tiny.gguf#sha256=${other}`, { dir }));
    expect(err.message).toBe(
      `${host.url}/files/tiny.gguf: its sha256 is ${sha(model)} where the URL's #sha256 gives ${other}; the download was deleted, the next start downloads it again`,
    );
  });

  it("refuses a resumed download whose kept part was damaged while it was stopped (bytes flipped, its size intact), and loads nothing", async () => {
    const dir = await modelsDir();
    const ref = "hf:Owner/Slow-GGUF:Q8_0";
    const part = path.join(dir, STAGING_FOLDER, modelFileName(parseModelRef(ref) as never) + PART_SUFFIX);
    const kept = Math.floor(model.length * 0.8);
    host.stallAfter(kept);
    const stop = new AbortController();
    const first = fetchModel(ref, {
      dir,
      hfEndpoint: host.url,
      signal: stop.signal,
      onStatus: (s) => s.bytes >= kept && stop.abort(new Error("stopped")),
    });
    await expect(first).rejects.toThrow("stopped");
    host.stallAfter(undefined);
    // The stop synced what came and moved the resume point to it.
    const record = JSON.parse(await readFile(part + RECORD_SUFFIX, "utf8"));
    expect(record).toMatchObject({ synced: kept, sha256: sha(model), size: model.length });
    const fd = await open(part, "r+");
    await fd.write(Buffer.alloc(64, 0x55), 0, 64, Math.floor(model.length / 2));
    await fd.close();
    const err = await oneLine(fetchModel(ref, { dir, hfEndpoint: host.url }));
    expect(err.message).toMatch(
      /^hf:Owner\/Slow-GGUF:Q8_0: its sha256 is [0-9a-f]{64} where Hugging Face gives [0-9a-f]{64}; the download was deleted/,
    );
    expect((await readdir(dir)).filter((f) => f !== STAGING_FOLDER)).toEqual([]);
    expect((await readdir(path.join(dir, STAGING_FOLDER))).filter((f) => !f.endsWith(".lock"))).toEqual([]);
    // The next start downloads it whole, and right.
    const file = await fetchModel(ref, { dir, hfEndpoint: host.url });
    expect(sha(await readFile(file))).toBe(sha(model));
  });

  it("says in one line that the host cannot be reached, and to name a local file", async () => {
    const closed = await closedPort();
    const dir = await modelsDir();
    const err = await oneLine(fetchModel(`http://127.0.0.1:${closed}/m.gguf`, { dir }));
    expect(err).toBeInstanceOf(ModelDownloadError);
    expect(err.message).toBe(
      `http://127.0.0.1:${closed}/m.gguf: cannot reach 127.0.0.1:${closed} (ECONNREFUSED); download the .gguf where the network allows and set MODEL_PATH to the local file`,
    );
    const hf = await oneLine(fetchModel("hf:Owner/Tiny-GGUF:Q8_0", { dir, hfEndpoint: `http://127.0.0.1:${closed}`, setting: "--model" }));
    expect(hf.message).toMatch(
      /^hf:Owner\/Tiny-GGUF:Q8_0: cannot reach 127\.0\.0\.1:\d+ \(ECONNREFUSED\); .* set --model to the local file$/,
    );
  });

  it("says what the host answered for a missing file or quantization", async () => {
    const dir = await modelsDir();
    expect((await oneLine(fetchModel(`${host.url}/files/none.gguf`, { dir }))).message).toMatch(
      /none\.gguf: 127\.0\.0\.1:\d+ answered 404 Not Found$/,
    );
    expect((await oneLine(fetchModel("hf:Owner/Tiny-GGUF:Q2_K", { dir, hfEndpoint: host.url }))).message).toMatch(
      /^hf:Owner\/Tiny-GGUF:Q2_K: .*Q2_K.*does not exist/,
    );
  });

  it("runs one download of a file at a time: a second caller waits and takes the first one's file", async () => {
    const dir = await modelsDir();
    const logs: string[] = [];
    const [a, b] = await Promise.all([
      fetchModel(`${host.url}/files/tiny.gguf`, { dir, log: (m) => logs.push(m) }),
      fetchModel(`${host.url}/files/tiny.gguf`, { dir, log: (m) => logs.push(m) }),
    ]);
    expect(a).toBe(b);
    expect(logs.filter((l) => l.startsWith("downloaded "))).toHaveLength(1);
    expect(logs.some((l) => l.startsWith("another process is downloading"))).toBe(true);
  });

  it("says in one line that MODELS_DIR cannot be written", async () => {
    const dir = await modelsDir();
    // What a file where the staging folder goes does to mkdir; a read-only volume does the same with EROFS.
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, STAGING_FOLDER), "");
    const err = await oneLine(fetchModel(`${host.url}/files/tiny.gguf`, { dir }));
    expect(err.message).toMatch(/: cannot write in .*\.downloading \((EEXIST|ENOTDIR)\); set MODELS_DIR to a writable folder$/);
  });

  it("refuses a file in the models folder that was damaged since, saying to delete it", async () => {
    const dir = await modelsDir();
    const file = await fetchModel(`${host.url}/files/tiny.gguf`, { dir });
    await writeFile(file, model.subarray(0, model.length - 100));
    const err = await oneLine(fetchModel(`${host.url}/files/tiny.gguf`, { dir }));
    expect(err.message).toBe(
      `${host.url}/files/tiny.gguf (${file}): is cut short: its tensors need ${model.length} bytes and the file has ${model.length - 100}; delete it to download it again`,
    );
  });

  it("gives a local file back as it is", async () => {
    const file = await scratch.write(model, "local.gguf");
    expect(await fetchModel(file, { dir: await modelsDir() })).toBe(file);
  });
});

describe("checkGgufFile", () => {
  it("passes a whole model and refuses one whose size differs from what was announced", async () => {
    const file = await scratch.write(model, "whole.gguf");
    await checkGgufFile(file);
    await expect(checkGgufFile(file, { label: "m", expectedBytes: model.length + 1 })).rejects.toThrow(
      `m: has ${model.length} bytes where ${model.length + 1} were announced; it is incomplete`,
    );
  });

  it("refuses a header cut short and an empty file", async () => {
    await expect(checkGgufFile(await scratch.write(model.subarray(0, 200), "head.gguf"), { label: "m" })).rejects.toThrow(
      /^m: (is cut short: its tensors need \d+ bytes and the file has 200|its GGUF header cannot be read \(.*\); the file is damaged or cut short)$/,
    );
    await expect(checkGgufFile(await scratch.write(Buffer.alloc(0), "empty.gguf"), { label: "m" })).rejects.toThrow(
      /^m: is not a GGUF model/,
    );
  });
});

describe("progressLine", () => {
  it("draws the bar with the bytes, the rate and the time left", () => {
    expect(progressLine({ model: "hf:a/b:Q8_0", bytes: 210e6, totalBytes: 676e6, bytesPerSecond: 12.5e6, etaSeconds: 37 })).toBe(
      "downloading hf:a/b:Q8_0 [######..............] 31% 210 MB of 676 MB, 13 MB/s, 37 s left",
    );
    expect(progressLine({ model: "m", bytes: 0, totalBytes: 0, bytesPerSecond: 0, etaSeconds: null })).toBe(
      "downloading m [....................] 0% 0 B of 0 B",
    );
  });
});
