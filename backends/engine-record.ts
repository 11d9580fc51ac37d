// What a local model's engine turned out to be, remembered beside the result cache, so that a run whose every line
// is already answered need not load the model to know its answers' key. The key of a cached answer holds the build
// node-llama-cpp picked, the GPU it found and the chat wrapper the model's template gave: each known only once the
// engine is up. The record is kept under everything that decides them (the model's content, the engine's settings,
// the binaries node-llama-cpp can choose from, the GPU devices present), so a change to any of them is another
// record, and the engine loads to make it.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
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

/** The version of node-llama-cpp installed. */
export const nodeLlamaCppVersion = () =>
  (JSON.parse(readFileSync(path.join(packageRoot(), "package.json"), "utf8")) as { version: string }).version;

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
  const nodeLlamaCpp = nodeLlamaCppVersion();
  const machine = {
    platform: process.platform,
    arch: process.arch,
    devices: GPU_DEVICES.filter((d) => existsSync(d)),
  };
  // This product's version too: how it picks an engine's settings (its chat wrapper, say) may change with it.
  const product = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version;
  const inputs = { v: 1, digest, settings, product, nodeLlamaCpp, binaries: binaries(), machine };
  return createHash("sha256").update(canonicalJson(inputs)).digest("hex");
}

type Records = Record<string, EngineRecord & { at: number }>;

/** The file's records, or why it holds none that can be read (absent is no reason: nothing was recorded yet). */
async function readRecords(file: string): Promise<{ records: Records; damaged?: string }> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === "ENOENT" ? { records: {} } : { records: {}, damaged: `cannot be read (${code ?? (err as Error).message})` };
  }
  try {
    const v = JSON.parse(text) as unknown;
    if (v && typeof v === "object" && !Array.isArray(v)) return { records: v as Records };
  } catch {
    // Told below, as a file of the wrong shape is.
  }
  return { records: {}, damaged: "is not a JSON object of records" };
}

/** A record as this product writes it: anything else (a hand edit, a torn copy) is no record, and the model loads. */
const RECORD = z.object({
  identity: z.string(),
  footprint: z.number().nonnegative(),
  info: z
    .object({
      model: z.string().min(1),
      kind: z.literal("local"),
      endpoints: z.array(z.string()).min(1),
      concurrency: z.number().int().positive(),
      generatedModel: z.boolean(),
      settings: z.looseObject({ gpu: z.literal(false) }),
      summary: z.string(),
    })
    .loose(),
});

/** Whether an identity is of the model whose content is `digest`: a record never answers for another file. */
function identityOf(identity: string, digest: string): boolean {
  try {
    const v = JSON.parse(identity) as { kind?: unknown; sha256?: unknown };
    return v.kind === "local" && v.sha256 === digest;
  } catch {
    return false;
  }
}

/**
 * The record kept under `key` for the model whose content is `digest`, if a whole one of an engine on CPU is (on a
 * GPU the layers offloaded depend on the memory free at load); `damaged` says why the file could not be read.
 */
export async function readEngineRecord(file: string, key: string, digest: string): Promise<{ record?: EngineRecord; damaged?: string }> {
  const { records, damaged } = await readRecords(file);
  const parsed = RECORD.safeParse(records[key]);
  if (!parsed.success || !identityOf(parsed.data.identity, digest)) return damaged ? { damaged } : {};
  const { identity, info, footprint } = parsed.data;
  return { record: { identity, info: info as unknown as BackendInfo, footprint } };
}

/** Record writes one at a time in this process: each reads, adds and replaces the whole file. */
let chain: Promise<unknown> = Promise.resolve();

/** Keeps `record` under `key` (replacing the file whole, so a reader never sees half of it). */
export function writeEngineRecord(file: string, key: string, record: EngineRecord): Promise<void> {
  const write = chain.then(async () => {
    const { records: all } = await readRecords(file);
    all[key] = { ...record, at: Date.now() };
    const kept = Object.fromEntries(
      Object.entries(all)
        .sort(([, a], [, b]) => b.at - a.at)
        .slice(0, KEPT),
    );
    await mkdir(path.dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    try {
      await writeFile(tmp, JSON.stringify(kept, null, 1));
      await rename(tmp, file);
    } catch (err) {
      await rm(tmp, { force: true }).catch(() => undefined);
      throw err;
    }
  });
  chain = write.catch(() => undefined);
  return write;
}
