// The composition root: config -> model -> engine -> stores/queue/worker -> HTTP app.
// api/main.ts listens on it; integration tests drive it through supertest.
import type express from "express";
import type pino from "pino";
import { lockBatchDir } from "./batch-dir-lock.js";
import type { Config } from "./config.js";
import { createControlPlane } from "./control/index.js";
import { createApp } from "./http/app.js";
import { createMetrics, type Metrics } from "./metrics/metrics.js";
import { startBackend } from "./start-engine.js";
import type { InferenceBackend } from "../openai/backend.js";

export interface Service {
  app: express.Express;
  backend: InferenceBackend;
  controlPlane: Awaited<ReturnType<typeof createControlPlane>>;
  /** This instance's Prometheus registry and hooks (GET /metrics). */
  metrics: Metrics;
  /** Stops the worker (running batches checkpoint), then releases the model. */
  close(opts?: { graceMs?: number }): Promise<void>;
}

export async function createService(config: Config, logger: pino.Logger): Promise<Service> {
  const unlock = lockBatchDir(config.batchDir);
  try {
    return await buildService(config, logger, unlock);
  } catch (err) {
    unlock();
    throw err;
  }
}

async function buildService(config: Config, logger: pino.Logger, unlock: () => void): Promise<Service> {
  const backend = await startBackend(config, logger);
  const metrics = createMetrics();
  metrics.setBackendInfo(backend.info);
  const controlPlane = await createControlPlane({ config, backend, logger, metrics });
  metrics.watch(controlPlane.status);
  const app = createApp({
    config,
    files: controlPlane.files,
    batches: controlPlane.batches,
    status: controlPlane.status,
    backendInfo: () => backend.info,
    logger,
    metrics,
  });
  let closed: Promise<void> | undefined;
  return {
    app,
    backend,
    controlPlane,
    metrics,
    close(opts = {}) {
      closed ??= (async () => {
        await controlPlane.worker.close({ graceMs: opts.graceMs ?? 10_000 });
        await controlPlane.close();
        await backend.close();
        unlock();
      })();
      return closed;
    },
  };
}
