// Downloads killed with SIGKILL at random points while their data flows, many times over, each resumed by the next
// start (`--fetch-models`, as the workers' init container runs it): the file in MODELS_DIR ends byte-identical to
// the source (sha256) for a plain URL, which gives no hash to check it by, and for hf:, which does; and whatever a
// kill leaves in MODELS_DIR is only ever the whole, right file.
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeGeneratedModel } from "../../engine/load/generated-model.js";
import { entryArgs } from "../../testkit/entry.js";
import { type ModelHost, startModelHost } from "../helpers/model-host.js";
import { type SpawnedProcess, spawnServer } from "../helpers/process.js";

/** Kills per source: each lands at a random byte of the transfer, after the process is up and data flows. */
const KILLS = 12;
/** The host's pace: the 1.4 MB model takes about 5 s, so a kill lands anywhere in it, and syncs (every second) happen between kills. */
const BYTES_PER_SECOND = 256 * 1024;

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-download-kills-"));
let host: ModelHost;
let model: Buffer;
const running: SpawnedProcess[] = [];
const seed = Number(process.env.OBI_TEST_SEED ?? Date.now() % 1_000_000);

beforeAll(async () => {
  const file = path.join(dir, "tiny.gguf");
  await writeGeneratedModel(file, { preset: "tiny" });
  model = readFileSync(file);
  host = await startModelHost();
  host.put("/files/k/tiny.gguf", model);
  host.put("/Owner/Kill-GGUF/resolve/main/kill-q8_0.gguf", model);
  host.manifest("Owner", "Kill-GGUF", "Q8_0", "kill-q8_0.gguf");
  host.throttle(BYTES_PER_SECOND);
});
afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
  await host?.close();
  rmSync(dir, { recursive: true, force: true });
});

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** mulberry32: the kill points are drawn from the seed the failure message names. */
function random(s: number) {
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

function fetchModels(modelsDir: string, ref: string): SpawnedProcess {
  const p = spawnServer(process.execPath, [...entryArgs("app/main.ts"), "--fetch-models"], {
    MODEL_PATH: ref,
    MODELS_DIR: modelsDir,
    HF_ENDPOINT: host.url,
    BATCH_DIR: path.join(dir, "batches"),
  });
  running.push(p);
  return p;
}

const exitedNow = (p: SpawnedProcess) => p.child.exitCode !== null || p.child.signalCode !== null;

/**
 * One download from an empty MODELS_DIR to its end, killed whenever its data has flowed a random stretch, until a start
 * gets to the end first; the file it ends with is returned. Every kill's leftovers are checked.
 */
async function downloadUnderKills(ref: string, draw: () => number, context: string) {
  const modelsDir = mkdtempSync(path.join(dir, "models-"));
  let kills = 0;
  let resumed = 0;
  for (;;) {
    const p = fetchModels(modelsDir, ref);
    // The process starts (a second or two), then the kill waits for its data to flow a random stretch.
    let from: number | undefined;
    const stretch = 16_000 + Math.floor(draw() * 400_000);
    while (!exitedNow(p)) {
      if (from === undefined && /"msg":"(downloading|resuming) /.test(p.output())) from = host.bytesSent();
      if (from !== undefined && host.bytesSent() >= from + stretch) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    if (exitedNow(p)) {
      expect(await p.exited, `${context}\n${p.output()}`).toBe(0);
      if (/"msg":"resuming /.test(p.output())) resumed++;
      const files = readdirSync(modelsDir).filter((f) => f.endsWith(".gguf"));
      expect(files, context).toHaveLength(1);
      expect(readdirSync(path.join(modelsDir, ".downloading")), context).toEqual([]);
      return { file: readFileSync(path.join(modelsDir, files[0])), kills, resumed };
    }
    p.child.kill("SIGKILL");
    await p.exited;
    kills++;
    if (/"msg":"resuming /.test(p.output())) resumed++;
    // A kill leaves the staging copy, or (had the file been whole and checked) the right file: never another.
    for (const f of readdirSync(modelsDir).filter((n) => n.endsWith(".gguf")))
      expect(sha(readFileSync(path.join(modelsDir, f))), context).toBe(sha(model));
  }
}

describe.each([
  ["a plain URL (no hash to check)", () => `${host.url}/files/k/tiny.gguf`],
  ["hf: (its sha256 checked)", () => "hf:Owner/Kill-GGUF:Q8_0"],
])("a download of %s killed at random points", (_what, ref) => {
  it(`ends byte-identical to the source every time, over ${KILLS} kills, and MODELS_DIR never holds anything else`, async () => {
    const draw = random(seed + ref().length);
    const context = `seed ${seed} (OBI_TEST_SEED reruns it)`;
    let kills = 0;
    let resumed = 0;
    while (kills < KILLS) {
      const round = await downloadUnderKills(ref(), draw, context);
      expect(sha(round.file), context).toBe(sha(model));
      kills += round.kills;
      resumed += round.resumed;
    }
    // Starts went on from what the ones before synced, rather than from the first byte. Not every one can: a round's
    // starts begin at byte 0 until one runs past the first sync (a second of data), and a kill lands when the host has
    // sent 16-416 KB, which on a loaded machine is ahead of what the process has written. Modelled on an idle
    // machine, nine in ten starts resume; on a loaded one, about half, and beside other heavy work 7 of 23 were
    // seen. A fifth still shows the resume: without it none would.
    expect(resumed, context).toBeGreaterThanOrEqual(kills / 5);
  }, 300_000);
});
