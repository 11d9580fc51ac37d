// Nodes (API servers, workers) of the real service in the distributed mode, started in this process on the shared
// state of testkit/shared-state.ts (a throwaway PostgreSQL and an S3 protocol server).
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import { createLogger } from "../../app/logger.js";
import { buildService, type Service, type ServiceOptions } from "../../app/service.js";
import type { ModelRouter } from "../../backends/router.js";
import { openEmbeddedCache } from "../../cache/open.js";
import { loadConfig } from "../../config/config.js";
import { unixNow } from "../../domain/clock.js";
import { MemoryState, memoryPorts, openStateFiles } from "../../embedded/index.js";
import { FsBlobStore } from "../../stores/fs-blob-store.js";
import { testModelPath } from "../../testkit/model.js";
import { type SharedState, startSharedState } from "../../testkit/shared-state.js";
import { type ServerProcess, startMain } from "./process.js";
import { listenOnLoopback, openaiClient, testServiceEnv } from "./service.js";

export interface TestNode {
  node: Service;
  baseUrl: string;
  /**
   * Every request that began on this node's engine (took a sequence), from before its worker could claim: bodies
   * (tests put the custom_id in the prompt) and the times they began (ms).
   */
  calls: EngineCalls;
  close(opts?: { graceMs?: number }): Promise<void>;
}

/**
 * One process's worth of the service (ROLE, WORKER_POOL... in `env`), in this process, on 127.0.0.1; on the shared
 * state `shared.env` points at, or on what `openState` opens (memoryState's: one process's memory).
 */
export async function startNode(
  shared: Pick<SharedState, "env"> & Pick<ServiceOptions, "openCache">,
  env: Record<string, string>,
  openState?: ServiceOptions["openState"],
): Promise<TestNode> {
  const batchDir = mkdtempSync(path.join(os.tmpdir(), "obi-node-"));
  const config = loadConfig({ ...(await testServiceEnv(batchDir)), ...shared.env, ...env });
  const calls: EngineCalls = { bodies: [], at: [] };
  const node = await buildService(config, createLogger(config.logLevel), {
    openState,
    ...(shared.openCache ? { openCache: shared.openCache } : {}),
    beforeWork: (models) => recordCalls(models, calls),
  });
  const { server, port } = await listenOnLoopback(node.app, config);
  node.controlPlane.advertise(`http://127.0.0.1:${port}`);
  let closed: Promise<void> | undefined;
  return {
    node,
    baseUrl: `http://127.0.0.1:${port}`,
    calls,
    close(opts = {}) {
      closed ??= (async () => {
        const closing = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await closing;
        await node.close({ graceMs: opts.graceMs ?? 2_000 });
        rmSync(batchDir, { recursive: true, force: true });
      })();
      return closed;
    },
  };
}

export interface EngineCalls {
  bodies: string[];
  at: number[];
}

/** The requests that began on a worker node's engine, or that its result cache answered, by the prompt each carries. */
export const countCalls = (node: TestNode): string[] => node.calls.bodies;

function recordCalls(models: ModelRouter, calls: EngineCalls): void {
  const record = (req: object) => {
    calls.bodies.push(JSON.stringify((req as { body?: unknown }).body ?? req));
    calls.at.push(Date.now());
  };
  for (const { backend } of models.backends()) {
    // A line the result cache answers as it is read takes no turn on the engine: counted as it is answered, as a
    // remembered answer told through execute counts as it begins.
    const fromCache = backend.answerFromCache?.bind(backend);
    if (fromCache)
      backend.answerFromCache = async (req, options) => {
        const answer = await fromCache(req, options);
        if (answer) record(req);
        return answer;
      };
    const execute = backend.execute.bind(backend);
    // Counted as it begins (takes a sequence): a line called off while it waited for one did not run.
    backend.execute = (req, signal, options) => {
      let begun = false;
      return execute(req, signal, {
        ...options,
        onBegin: () => {
          if (!begun) record(req);
          begun = true;
          options?.onBegin?.();
        },
      });
    };
  }
}

/** Calls whose body has `marker` that started after `after` (ms). */
export const startedAfter = (calls: EngineCalls, marker: string, after: number) =>
  calls.bodies.filter((b, i) => b.includes(marker) && calls.at[i] > after);

export { type SharedState, startSharedState } from "../../testkit/shared-state.js";

/** Stops the nodes at once (no grace: tests are done with them), then the shared state they ran on. */
export async function closeCluster(nodes: readonly TestNode[], shared: Pick<SharedState, "close"> | undefined): Promise<void> {
  for (const n of nodes) await n.close({ graceMs: 0 });
  await shared?.close();
}

/**
 * The service as a child process on the shared state (`app/main.ts`, compiled as testkit/entry.ts starts it), on a temp
 * BATCH_DIR removed once it exits, however it ends; resolves once it listens.
 */
export async function startChild(shared: SharedState, env: Record<string, string>): Promise<ServerProcess> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-child-"));
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  const started = startMain({ ...shared.env, BATCH_DIR: dir, MODEL_PATH: await testModelPath(), THREADS: "1", ...env }, 60_000);
  const child = await started.catch((err: unknown) => {
    removeDir();
    throw err;
  });
  void child.exited.then(removeDir);
  return child;
}

/** A finished batch's result lines, output and error files downloaded with the official client. */
export async function downloadResults(
  node: { baseUrl: string },
  batch: { output_file_id?: string | null; error_file_id?: string | null },
): Promise<{ output: any[]; errors: any[]; ids: string[] }> {
  const read = async (id: string | null | undefined) =>
    id
      ? (await (await openaiClient(node).files.content(id)).text())
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
      : [];
  const output = await read(batch.output_file_id);
  const errors = await read(batch.error_file_id);
  return { output, errors, ids: [...output, ...errors].map((l) => l.custom_id).sort() };
}

/**
 * State shared by the nodes of this process (the cluster ports in memory, contents in one folder): the distributed
 * mode's domain with no database. `open` is startNode's `openState`. With `inPlace`, the state is kept in files in
 * that folder and shards run in place (as one machine runs them); `reopen()` then reads it back, as a restarted
 * process would.
 */
export function memoryState(opts: { inPlace?: boolean } = {}): {
  /** The settings of the distributed mode: its DATABASE_URL is never dialled (the state is this process's). */
  env: Record<string, string>;
  open: NonNullable<ServiceOptions["openState"]>;
  /** The result cache every node of this process shares, as the workers share PostgreSQL's (LMDB in the folder). */
  openCache: NonNullable<ServiceOptions["openCache"]>;
  dir: string;
  blobs: FsBlobStore;
  reopen(): Promise<void>;
  close(): void;
} {
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-mem-"));
  const blobs = new FsBlobStore(dir);
  let state: Promise<MemoryState> | undefined;
  const load = () => (opts.inPlace ? openStateFiles(dir, createLogger("silent")) : Promise.resolve(new MemoryState()));
  let cache: ReturnType<typeof openEmbeddedCache> | undefined;
  return {
    // One store for every node, each node's close leaving it open for the others (the folder goes with close()).
    openCache: async (config) => {
      cache ??= openEmbeddedCache(dir, config.resultCache);
      const opened = await cache;
      return { ...opened, cache: Object.assign(Object.create(opened.cache), { close: async () => {} }) };
    },
    env: { DATABASE_URL: "postgresql://in-process.invalid/memory" },
    dir,
    blobs,
    open: async (config) => {
      state ??= load();
      const ports = memoryPorts({ state: await state, blobs, expirySeconds: config.fileExpirySeconds, now: unixNow });
      return { ports, blobs, runs: opts.inPlace ? "in-place" : "parts" };
    },
    async reopen() {
      await (await state)?.flush();
      state = load();
    },
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * An API server and a spot worker of the distributed mode for the enclosing describe block, started before its tests
 * and closed after them: on one process's memory (memoryState), or on PostgreSQL and S3 (startSharedState).
 */
export function apiAndWorker(
  on: "memory" | "postgres",
  env: Record<string, string>,
  workerId: string,
): { readonly api: TestNode; readonly worker: TestNode; another(env: Record<string, string>): Promise<TestNode> } {
  let mem: ReturnType<typeof memoryState> | undefined;
  let shared: SharedState | undefined;
  const more: TestNode[] = [];
  const nodes = {
    /** One more node on the same state (closed with the others). */
    async another(extra: Record<string, string>) {
      const n = await startNode((mem ?? shared)!, { ...env, ...extra }, mem?.open);
      more.push(n);
      return n;
    },
  } as { api: TestNode; worker: TestNode; another(env: Record<string, string>): Promise<TestNode> };
  beforeAll(async () => {
    if (on === "memory") mem = memoryState();
    else shared = await startSharedState();
    const state = (mem ?? shared)!;
    const open = mem?.open;
    nodes.api = await startNode(state, { ...env, ROLE: "api" }, open);
    nodes.worker = await startNode(state, { ...env, ROLE: "worker", WORKER_ID: workerId, WORKER_POOL: "spot" }, open);
  }, 120_000);
  afterAll(async () => {
    for (const n of [...more, nodes.worker, nodes.api]) await n?.close();
    mem?.close();
    await shared?.close();
  }, 60_000);
  return nodes;
}
