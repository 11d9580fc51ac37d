// What a local model's engine turned out to be, remembered beside the result cache, so that a run whose every line
// is already answered need not load the model to know its answers' key. The key of a cached answer holds the build
// node-llama-cpp picked, the GPU it found and the chat wrapper the model's template gave: each known only once the
// engine is up. The record is kept under everything that decides them (the model's content, the engine's settings,
// the binaries node-llama-cpp can choose from, the GPU devices present), so a change to any of them is another
// record, and the engine loads to make it.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { canonicalJson } from "../cache/rule.js";
import type { BackendInfo } from "../openai/backend.js";

/** An engine as it came up: its answers' identity in the result cache, and what the served backend said of itself. */
export interface EngineRecord {
  identity: string;
  info: BackendInfo;
  /** The memory its load was estimated to take (engine/load/footprint.ts), for the router's budget. */
  footprint: number;
}

/** Records kept at most: one per model and settings a machine ran, the oldest dropped first. */
const KEPT = 64;

/** The devices through which node-llama-cpp's GPU builds find a GPU: one appearing may change the engine it picks. */
const GPU_DEVICES = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/kfd", "/dev/dri"];

/** node-llama-cpp's folder. */
const packageRoot = () => path.resolve(path.dirname(fileURLToPath(import.meta.resolve("node-llama-cpp"))), "..");

/** Each binary node-llama-cpp may load here: its local builds (by file version) and its prebuilt packages (by version). */
function binaries(): string[] {
  const seen: string[] = [];
  const builds = path.join(packageRoot(), "llama", "localBuilds");
  for (const dir of existsSync(builds) ? readdirSync(builds).sort() : []) {
    const addon = path.join(builds, dir, "Release", "llama-addon.node");
    const s = statSync(addon, { throwIfNoEntry: false });
    seen.push(`local:${dir}:${s ? `${s.size}:${s.mtimeMs}` : "none"}`);
  }
  const scope = path.join(packageRoot(), "..", "@node-llama-cpp");
  for (const name of existsSync(scope) ? readdirSync(scope).sort() : []) {
    try {
      const { version } = JSON.parse(readFileSync(path.join(scope, name, "package.json"), "utf8")) as { version?: string };
      seen.push(`prebuilt:${name}@${version}`);
    } catch {
      seen.push(`prebuilt:${name}:unreadable`);
    }
  }
  return seen;
}

/**
 * The key of a model's record: its content's digest, the engine's settings as asked (not as resolved), node-llama-cpp's
 * version, the binaries it chooses from and the GPU devices of this machine.
 */
export function engineRecordKey(digest: string, settings: Readonly<Record<string, unknown>>): string {
  const nodeLlamaCpp = (JSON.parse(readFileSync(path.join(packageRoot(), "package.json"), "utf8")) as { version: string }).version;
  const machine = {
    platform: process.platform,
    arch: process.arch,
    devices: GPU_DEVICES.filter((d) => existsSync(d)),
  };
  const inputs = { v: 1, digest, settings, nodeLlamaCpp, binaries: binaries(), machine };
  return createHash("sha256").update(canonicalJson(inputs)).digest("hex");
}

type Records = Record<string, EngineRecord & { at: number }>;

async function readRecords(file: string): Promise<Records> {
  try {
    const v = JSON.parse(await readFile(file, "utf8")) as unknown;
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Records) : {};
  } catch {
    return {};
  }
}

/** The record kept under `key`, if a whole one is. */
export async function readEngineRecord(file: string, key: string): Promise<EngineRecord | undefined> {
  const r = (await readRecords(file))[key];
  const whole =
    r &&
    typeof r.identity === "string" &&
    typeof r.footprint === "number" &&
    r.info &&
    typeof r.info === "object" &&
    Array.isArray(r.info.endpoints);
  return whole ? { identity: r.identity, info: r.info, footprint: r.footprint } : undefined;
}

/** Record writes one at a time in this process: each reads, adds and replaces the whole file. */
let chain: Promise<unknown> = Promise.resolve();

/** Keeps `record` under `key` (replacing the file whole, so a reader never sees half of it). */
export function writeEngineRecord(file: string, key: string, record: EngineRecord): Promise<void> {
  const write = chain.then(async () => {
    const all = await readRecords(file);
    all[key] = { ...record, at: Date.now() };
    const kept = Object.fromEntries(
      Object.entries(all)
        .sort(([, a], [, b]) => b.at - a.at)
        .slice(0, KEPT),
    );
    await mkdir(path.dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    await writeFile(tmp, JSON.stringify(kept, null, 1));
    await rename(tmp, file);
  });
  chain = write.catch(() => undefined);
  return write;
}
