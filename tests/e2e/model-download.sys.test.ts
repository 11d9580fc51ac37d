// A first start on MODEL_PATH=hf:... or a URL, on the real server process, against a local host that answers as
// Hugging Face does: the model downloads with its progress in the log and on /ready, answered on the port the service
// then serves (/health 200, /ready and every other route 503 `starting`), a kill mid-download resumes on the next
// start from what reached the disk, a kept part damaged meanwhile is refused by its sha256, a start with the file in
// MODELS_DIR downloads nothing, a cut or non-GGUF file and a host that cannot be reached stop the start with one
// line, and nothing half-downloaded is ever in the models folder.
import { createHash } from "node:crypto";
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { writeGeneratedModel } from "../../engine/load/generated-model.js";
import { closedPort, type ModelHost, startModelHost } from "../helpers/model-host.js";
import { type SpawnedProcess, spawnMain, untilListening } from "../helpers/process.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-model-download-"));
let host: ModelHost;
const models: Record<"tiny" | "small", Buffer> = { tiny: Buffer.alloc(0), small: Buffer.alloc(0) };
const running: SpawnedProcess[] = [];

beforeAll(async () => {
  for (const preset of ["tiny", "small"] as const) {
    const file = path.join(dir, `${preset}.gguf`);
    await writeGeneratedModel(file, { preset });
    models[preset] = readFileSync(file);
  }
  host = await startModelHost();
  host.put("/Owner/Tiny-GGUF/resolve/main/tiny-q8_0.gguf", models.tiny);
  host.manifest("Owner", "Tiny-GGUF", "Q8_0", "tiny-q8_0.gguf");
  host.put("/Owner/Small-GGUF/resolve/main/small-q8_0.gguf", models.small);
  host.manifest("Owner", "Small-GGUF", "Q8_0", "small-q8_0.gguf");
  host.put("/files/x/small.gguf", models.small);
  host.put("/files/x/cut.gguf", models.tiny.subarray(0, Math.floor(models.tiny.length / 2)));
  host.put("/files/x/page.gguf", Buffer.from("<html><body>Please log in</body></html>"));
});
// A test that fails while the host stalls must not leave the next ones stalled.
afterEach(() => host.stallAfter(undefined));
afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
  await host?.close();
  rmSync(dir, { recursive: true, force: true });
});

function start(modelsDir: string, env: Record<string, string>): SpawnedProcess {
  const p = spawnMain({
    HOST: "127.0.0.1",
    PORT: "0",
    BATCH_DIR: mkdtempSync(path.join(dir, "batches-")),
    MODELS_DIR: modelsDir,
    HF_ENDPOINT: host.url,
    GPU: "false",
    THREADS: "1",
    SEQUENCES: "1",
    CONTEXT_SIZE: "256",
    ...env,
  });
  running.push(p);
  return p;
}

/** The address the process holds from its first moment (PORT=0: the one it logs), before its download begins. */
async function startupUrl(p: SpawnedProcess): Promise<string> {
  return whileRunning(p, () => /starting on (http:\/\/127\.0\.0\.1:\d+):/.exec(p.output())?.[1]);
}

async function whileRunning<T>(p: SpawnedProcess, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (p.child.exitCode !== null) throw new Error(`the server exited:\n${p.output()}`);
    if (Date.now() > deadline) throw new Error(`timed out:\n${p.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const ready = async (base: string) => {
  const res = await fetch(`${base}/ready`);
  return { status: res.status, retryAfter: res.headers.get("retry-after"), body: (await res.json()) as any };
};
const ggufsIn = (d: string) => readdirSync(d).filter((f) => f.endsWith(".gguf"));
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

describe("a model named by hf: on the first start", () => {
  const modelsDir = path.join(dir, "models-hf");

  it("answers /health 200 and /ready 503 with the download's progress on the port it then serves, and serves the model under its reference", async () => {
    host.stallAfter(400_000);
    const p = start(modelsDir, { MODEL_PATH: "hf:Owner/Tiny-GGUF:q8_0" });
    const base = await startupUrl(p);
    const during = await whileRunning(p, async () => {
      const r = await ready(base);
      return r.body.downloads?.[0]?.bytes >= 300_000 ? r : undefined;
    });
    expect(during.status).toBe(503);
    expect(during.retryAfter).toBe("5");
    expect(during.body.status).toBe("starting");
    expect(during.body.error).toMatchObject({ type: "server_error", code: "starting" });
    expect(during.body.error.message).toMatch(/^Downloading hf:Owner\/Tiny-GGUF:Q8_0 \[#+\.+\] \d+% [\d.]+ kB of 1\.\d MB/);
    expect(during.body.downloads).toEqual([
      expect.objectContaining({ model: "hf:Owner/Tiny-GGUF:Q8_0", state: "downloading", total_bytes: models.tiny.length }),
    ]);
    expect(during.body.downloads[0]).toHaveProperty("bytes_per_second");
    expect(during.body.downloads[0]).toHaveProperty("eta_seconds");
    // Alive while it downloads: a liveness probe leaves it be.
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "starting" });
    const other = await fetch(`${base}/v1/models`);
    expect(other.status).toBe(503);
    expect(other.headers.get("retry-after")).toBe("5");
    expect(((await other.json()) as any).error).toMatchObject({
      code: "starting",
      message: expect.stringMatching(
        /^The server is starting: downloading hf:Owner\/Tiny-GGUF:Q8_0 \[#+\.+\] \d+% .* GET \/ready shows the progress\.$/,
      ),
    });
    // Nothing half-downloaded is in the models folder while it runs.
    expect(ggufsIn(modelsDir)).toEqual([]);

    host.stallAfter(undefined);
    const server = await untilListening(p, 60_000);
    // One server: the port that answered the start is the service's.
    expect(server.baseUrl).toBe(base);
    const r = await ready(server.baseUrl);
    expect(r.status).toBe(200);
    expect(r.body.model).toBe("Owner/Tiny-GGUF:Q8_0");
    expect(await (await fetch(`${base}/health`)).json()).toEqual({ status: "ok" });
    expect(p.output()).toMatch(/"msg":"downloading hf:Owner\/Tiny-GGUF:Q8_0 \[#{20}\] 100% 1\.\d MB of 1\.\d MB/);
    expect(p.output()).toMatch(
      /"msg":"downloaded hf:Owner\/Tiny-GGUF:Q8_0 into .* \(sha256 [0-9a-f]{64}, checked against Hugging Face's\)"/,
    );
    const files = ggufsIn(modelsDir);
    expect(files).toHaveLength(1);
    expect(sha(readFileSync(path.join(modelsDir, files[0])))).toBe(sha(models.tiny));
    p.child.kill("SIGTERM");
    await p.exited;
  }, 120_000);

  it("downloads nothing on the next start: the file in MODELS_DIR is used as it is", async () => {
    const before = host.requests.length;
    const p = start(modelsDir, { MODEL_PATH: "hf:Owner/Tiny-GGUF:Q8_0", HF_ENDPOINT: `http://127.0.0.1:${await closedPort()}` });
    const server = await untilListening(p, 60_000);
    expect((await ready(server.baseUrl)).body.model).toBe("Owner/Tiny-GGUF:Q8_0");
    expect(host.requests.length).toBe(before);
    expect(p.output()).not.toMatch(/"msg":"download/);
    p.child.kill("SIGTERM");
    await p.exited;
  }, 120_000);
});

describe("a download killed midway", () => {
  const url = () => `${host.url}/files/x/small.gguf`;

  /** Starts a download of `ref` into `modelsDir`, kills it once 20 MB came and a resume point was synced; the staging file. */
  async function killMidway(modelsDir: string, ref: string) {
    const stalledAt = host.bytesSent() + 20_000_000;
    host.stallAfter(20_000_000);
    const first = start(modelsDir, { MODEL_PATH: ref });
    const base = await startupUrl(first);
    const staging = path.join(modelsDir, ".downloading");
    const part = () => path.join(staging, readdirSync(staging).find((f) => f.endsWith(".part")) ?? "none");
    const synced = () => (existsSync(`${part()}.resume.json`) ? JSON.parse(readFileSync(`${part()}.resume.json`, "utf8")).synced : 0);
    await whileRunning(first, async () =>
      host.bytesSent() >= stalledAt && synced() > 0 && (await ready(base)).body.downloads?.[0]?.bytes > 0 ? true : undefined,
    );
    first.child.kill("SIGKILL");
    await first.exited;
    expect(ggufsIn(modelsDir)).toEqual([]);
    host.stallAfter(undefined);
    return { part: part(), synced: synced() as number };
  }

  it("resumes on the next start from what reached the disk, at once, and only the whole, checked file is ever loaded", async () => {
    const modelsDir = path.join(dir, "models-resume");
    const size = models.small.length;
    const { synced } = await killMidway(modelsDir, url());
    const requestsBefore = host.requests.length;
    const second = start(modelsDir, { MODEL_PATH: url() });
    const server = await untilListening(second, 120_000);
    expect((await ready(server.baseUrl)).status).toBe(200);
    // The killed process's lock is known dead (its process is gone from this machine): no wait for it to go stale.
    expect(second.output()).not.toContain("another process is downloading");
    expect(second.output()).toContain(`"msg":"resuming ${url()} from the `);
    // The rest is asked from the resume point on, and only the rest is sent.
    const gets = host.requests.slice(requestsBefore).filter((r) => r.method === "GET" && r.path === "/files/x/small.gguf");
    expect(gets.map((r) => r.range)).toEqual([`bytes=${synced}-`]);
    expect(gets[0].bytes).toBe(size - synced);
    // The log's bar: the bytes, this run's rate and the time left.
    expect(second.output()).toMatch(/\[#{20}\] 100% 69 MB of 69 MB, [\d.]+ [kM]B\/s, 0 s left/);
    const files = ggufsIn(modelsDir);
    expect(files).toHaveLength(1);
    expect(sha(readFileSync(path.join(modelsDir, files[0])))).toBe(sha(models.small));
    second.child.kill("SIGTERM");
    await second.exited;
  }, 240_000);

  it("refuses in one line, and never loads, a kept part damaged while it was stopped (bytes flipped, its size intact)", async () => {
    const modelsDir = path.join(dir, "models-damaged");
    const ref = "hf:Owner/Small-GGUF:Q8_0";
    const { part, synced } = await killMidway(modelsDir, ref);
    const fd = openSync(part, "r+");
    writeSync(fd, Buffer.alloc(4096, 0x5a), 0, 4096, Math.floor(synced / 2));
    closeSync(fd);
    const second = start(modelsDir, { MODEL_PATH: ref, LOG_LEVEL: "error" });
    expect(await second.exited).toBe(1);
    expect(second.output().trim().split("\n").at(-1)).toMatch(
      /^offline-batch-inference: failed to start: hf:Owner\/Small-GGUF:Q8_0: its sha256 is [0-9a-f]{64} where Hugging Face gives [0-9a-f]{64}; the download was deleted, the next start downloads it again$/,
    );
    expect(ggufsIn(modelsDir)).toEqual([]);
    expect(readdirSync(path.join(modelsDir, ".downloading")).filter((f) => f.includes(".part"))).toEqual([]);
    // The next start downloads it whole, and it is the model.
    const third = start(modelsDir, { MODEL_PATH: ref });
    const server = await untilListening(third, 120_000);
    expect((await ready(server.baseUrl)).status).toBe(200);
    expect(sha(readFileSync(path.join(modelsDir, ggufsIn(modelsDir)[0])))).toBe(sha(models.small));
    third.child.kill("SIGTERM");
    await third.exited;
  }, 240_000);
});

describe("a download that cannot be used", () => {
  it.each([
    ["cut short", "/files/x/cut.gguf", /cut\.gguf: is cut short: its tensors need \d+ bytes and the file has \d+$/],
    ["not a GGUF", "/files/x/page.gguf", /page\.gguf: is not a GGUF model \(it begins with '<html><body>Please log i'\)$/],
  ])("a file %s stops the start with one line, and nothing of it is kept", async (_what, file, why) => {
    const modelsDir = mkdtempSync(path.join(dir, "models-bad-"));
    const p = start(modelsDir, { MODEL_PATH: `${host.url}${file}`, LOG_LEVEL: "error" });
    expect(await p.exited).toBe(1);
    const lines = p.output().trim().split("\n");
    expect(lines.at(-1)).toMatch(/^offline-batch-inference: failed to start: http:\/\/127\.0\.0\.1:\d+\//);
    expect(lines.at(-1)).toMatch(why);
    expect(ggufsIn(modelsDir)).toEqual([]);
    expect(ggufsIn(path.join(modelsDir, ".downloading"))).toEqual([]);
  });

  it("a host that cannot be reached stops the start at once with one line saying to name a local file", async () => {
    const modelsDir = mkdtempSync(path.join(dir, "models-away-"));
    const closed = await closedPort();
    const p = start(modelsDir, {
      MODEL_PATH: "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0",
      HF_ENDPOINT: `http://127.0.0.1:${closed}`,
      LOG_LEVEL: "error",
    });
    expect(await p.exited).toBe(1);
    expect(p.output().trim().split("\n")).toEqual([
      `offline-batch-inference: failed to start: hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0: cannot reach 127.0.0.1:${closed} (ECONNREFUSED); download the .gguf where the network allows and set MODEL_PATH to the local file`,
    ]);
  });
});
