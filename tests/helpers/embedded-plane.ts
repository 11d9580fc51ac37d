// Shared setup of the control-plane integration tests: the real engine on the small test model,
// a temp BATCH_DIR, and helpers to upload batch files and wait for a batch to reach a status.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterAll, afterEach, beforeAll } from "vitest";
import { buildControlPlane, type ControlPlane } from "../../app/control-plane.js";
import { embeddedState } from "../../app/plane-state.js";
import { type Config, loadConfig } from "../../config/config.js";
import type { Batch, BatchStatus, FileObject } from "../../domain/objects.js";
import type { ExpiresAfter, Owner } from "../../domain/ports.js";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import type { Engine } from "../../engine/types.js";
import { until } from "../../testkit/batch-client.js";
import { openTestEngine } from "../../testkit/model.js";
import { routerOver } from "./router.js";

export const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });

export { openTestEngine };

export const tempBatchDir = () => mkdtempSync(path.join(os.tmpdir(), "obi-control-"));

export interface ControlTestbed {
  /** The BATCH_DIR of the current test (created by its first open). */
  readonly dir: string;
  /**
   * A control plane on the current test's BATCH_DIR; opening again reuses the folder, as a restart
   * does. `engineFor` may wrap the file's engine (to observe its calls, say).
   */
  open(env?: Record<string, string>, engineFor?: (engine: Engine) => Engine): Promise<ControlPlane>;
}

/**
 * Registers the hooks of a control-plane test file: one real engine for the file; after each test
 * its planes are closed and its BATCH_DIR removed.
 */
export function controlTestbed(baseEnv: Record<string, string> = {}): ControlTestbed {
  let engine: Engine | undefined;
  let dir = "";
  const planes: ControlPlane[] = [];
  beforeAll(async () => {
    engine = await openTestEngine();
  });
  afterAll(() => engine?.close());
  afterEach(async () => {
    for (const p of planes.splice(0)) await p.close();
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = "";
  });
  return {
    get dir() {
      return dir;
    },
    async open(env = {}, engineFor = (e: Engine) => e) {
      dir ||= tempBatchDir();
      const config = testConfig(dir, { ...baseEnv, ...env });
      const models = routerOver(new LlamaBackend(engineFor(engine!)));
      const cp = await buildControlPlane({ config, models, logger, state: await embeddedState(config, models, logger) });
      planes.push(cp);
      return cp;
    },
  };
}

export function testConfig(batchDir: string, env: Record<string, string> = {}): Config {
  return loadConfig({ BATCH_DIR: batchDir, LOG_LEVEL: "silent", PIPELINE_BATCH_SIZE: "8", ...env });
}

/** Uploads `content` the way the files route does (a temp file adopted by the store). */
export async function upload(
  cp: ControlPlane,
  batchDir: string,
  content: string,
  owner: Owner = null,
  expiresAfter?: ExpiresAfter,
): Promise<FileObject> {
  const tmp = path.join(batchDir, `upload-${Math.random().toString(36).slice(2)}.tmp`);
  writeFileSync(tmp, content);
  return cp.files.adopt({ tmpPath: tmp, filename: "input.jsonl", purpose: "batch", owner, expiresAfter });
}

/** Where a file's content sits on disk (its key in the folder's blob store). */
export async function pathOf(cp: ControlPlane, batchDir: string, fileId: string, owner: Owner): Promise<string | undefined> {
  const found = await cp.files.keyOf(fileId, owner);
  return found && path.join(batchDir, found.key);
}

/** The batch once `done` holds for it, polled through `until` (the run itself is event driven; this only observes it). */
export async function untilBatch(
  cp: ControlPlane,
  id: string,
  done: (b: Batch) => boolean,
  opts: { owner?: Owner; timeoutMs?: number } = {},
): Promise<Batch> {
  let last: Batch | undefined;
  return until(
    `batch ${id}`,
    async () => {
      last = await cp.batches.get(id, opts.owner ?? null);
      return last && done(last) ? structuredClone(last) : undefined;
    },
    { timeoutMs: opts.timeoutMs ?? 30_000, everyMs: 25, seen: () => last },
  );
}

export const inStatus =
  (...statuses: BatchStatus[]) =>
  (b: Batch) =>
    statuses.includes(b.status);

export function readJsonl(file: string): any[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));
}
