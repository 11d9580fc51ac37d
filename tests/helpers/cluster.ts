// Nodes (API servers, workers) of the real service in the distributed mode, started in this process on the shared
// state of bench/shared-state.ts (a throwaway PostgreSQL and an S3 protocol server).
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../../api/config.js";
import { createLogger } from "../../api/logger.js";
import { type ClusterService, createClusterService } from "../../api/service.js";
import { testServiceEnv } from "./service.js";
import type { SharedState } from "../../bench/shared-state.js";

export interface TestNode {
  node: ClusterService;
  baseUrl: string;
  close(opts?: { graceMs?: number }): Promise<void>;
}

/** One process's worth of the service (ROLE, WORKER_POOL... in `env`), in this process, on 127.0.0.1. */
export async function startNode(shared: SharedState, env: Record<string, string>): Promise<TestNode> {
  const batchDir = mkdtempSync(path.join(os.tmpdir(), "obi-node-"));
  const config = loadConfig({ ...(await testServiceEnv(batchDir)), ...shared.env, ...env });
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

export { type SharedState, startSharedState } from "../../bench/shared-state.js";
