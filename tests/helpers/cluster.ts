// The distributed mode's shared state for tests: a throwaway PostgreSQL cluster and an S3 protocol server (s3rver)
// on loopback, and nodes (API servers, workers) of the real service started on them, in this process or as
// child processes.
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import S3rver from "s3rver";
import { loadConfig } from "../../api/config.js";
import { createLogger } from "../../api/logger.js";
import { type ClusterService, createClusterService } from "../../api/service.js";
import { testModelPath } from "./model.js";
import { startPostgres, type TestPostgres } from "./postgres.js";

export interface SharedState {
  pg: TestPostgres;
  /** DATABASE_URL and the S3 settings every node gets. */
  env: Record<string, string>;
  /** Stops the S3 server (storage unreachable) and starts it again on the same port. */
  stopS3(): Promise<void>;
  startS3(): Promise<void>;
  close(): Promise<void>;
}

export async function startSharedState(): Promise<SharedState> {
  const pg = await startPostgres();
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-s3-"));
  let port = 0;
  let s3: S3rver | undefined;
  const startS3 = async () => {
    // No bucket: the service creates it at start (several nodes starting at once race to).
    s3 = new S3rver({ address: "127.0.0.1", port, silent: true, directory: dir });
    port = ((await s3.run()) as AddressInfo).port;
  };
  await startS3();
  return {
    pg,
    env: {
      DATABASE_URL: pg.url,
      S3_ENDPOINT: `http://127.0.0.1:${port}`,
      S3_BUCKET: "obi",
      S3_ACCESS_KEY_ID: "S3RVER",
      S3_SECRET_ACCESS_KEY: "S3RVER",
    },
    async stopS3() {
      await s3?.close();
      s3 = undefined;
    },
    startS3,
    async close() {
      await s3?.close();
      pg.destroy();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface TestNode {
  node: ClusterService;
  baseUrl: string;
  close(opts?: { graceMs?: number }): Promise<void>;
}

/** One process's worth of the service (ROLE, WORKER_POOL... in `env`), in this process, on 127.0.0.1. */
export async function startNode(shared: SharedState, env: Record<string, string>): Promise<TestNode> {
  const batchDir = mkdtempSync(path.join(os.tmpdir(), "obi-node-"));
  const config = loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    BATCH_DIR: batchDir,
    MODEL_PATH: await testModelPath(),
    THREADS: "1",
    SEQUENCES: "4",
    CONTEXT_SIZE: "512",
    EMBEDDING_CONTEXTS: "1",
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    ...shared.env,
    ...env,
  });
  const node = await createClusterService(config, createLogger(config.logLevel));
  const server = node.app.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const { port } = server.address() as AddressInfo;
  let closed: Promise<void> | undefined;
  return {
    node,
    baseUrl: `http://127.0.0.1:${port}`,
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

/** Counts the engine calls of a worker node, by the prompt each carries (tests put the custom_id in it). */
export function countCalls(node: ClusterService): string[] {
  const calls: string[] = [];
  for (const { backend } of node.models.backends()) {
    const execute = backend.execute.bind(backend);
    backend.execute = (req, signal) => {
      calls.push(JSON.stringify((req as { body?: unknown }).body ?? req));
      return execute(req, signal);
    };
  }
  return calls;
}
