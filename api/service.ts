// The composition root: config -> model registry and backends -> stores/queue/worker -> HTTP app.
// api/main.ts listens on it; integration tests drive it through supertest.
import type express from "express";
import type pino from "pino";
import { lockBatchDir } from "./batch-dir-lock.js";
import type { Config } from "./config.js";
import { SERVED_ENDPOINTS } from "./control/batch-object.js";
import { createControlPlane } from "./control/index.js";
import { createApp } from "./http/app.js";
import { createMetrics, type Metrics } from "./metrics/metrics.js";
import { createRouter, loadRegistry } from "./start-backends.js";
import type { BackendInfo, InferenceBackend } from "../openai/backend.js";
import type { ModelRegistry } from "../backends/registry.js";
import { type ClusterPlane, createClusterPlane, openSharedState } from "../cluster/index.js";
import { unixNow } from "./clock.js";
import type { ModelRouter } from "../backends/router.js";

export interface Service {
  app: express.Express;
  /** The primary model's backend (the default model, else the first in the registry), up from the start. */
  backend: InferenceBackend;
  models: ModelRouter;
  controlPlane: ClusterPlane;
  /** This instance's Prometheus registry and hooks (GET /metrics). */
  metrics: Metrics;
  /** Stops the worker (running batches checkpoint), then releases the model. */
  close(opts?: { graceMs?: number }): Promise<void>;
}

/** What api/main.ts runs: the embedded service, or with DATABASE_URL one role of the distributed mode. */
export async function startService(config: Config, logger: pino.Logger): Promise<Pick<Service, "app" | "close">> {
  return config.cluster.databaseUrl ? createClusterService(config, logger) : createService(config, logger);
}

export interface ClusterService {
  app: express.Express;
  models: ModelRouter;
  cluster: ClusterPlane;
  metrics: Metrics;
  close(opts?: { graceMs?: number }): Promise<void>;
}

export interface ClusterServiceOptions {
  /** Opens the shared state (default: PostgreSQL and the blob store the config names). */
  openState?: typeof openSharedState;
  /** Sees the model router once the primary model is up and before any worker can claim (tests count engine calls). */
  beforeWork?: (models: ModelRouter) => void;
}

/**
 * The distributed mode: shared state in PostgreSQL and the blob store (or what `openState` opens); ROLE=api serves
 * the API without loading a model, ROLE=worker runs shards (and answers only health, readiness and metrics), ROLE=all
 * both.
 */
export async function createClusterService(
  config: Config,
  logger: pino.Logger,
  { openState = openSharedState, beforeWork }: ClusterServiceOptions = {},
): Promise<ClusterService> {
  const { role } = config.cluster;
  // An API server runs no model, so what loading one would warn about (a generated model) is not its concern.
  const registry = await loadRegistry(config, role === "api" ? logger.child({}, { level: "error" }) : logger);
  const models = await createRouter(config, registry, logger);
  let backend: InferenceBackend | undefined;
  let cluster: ClusterPlane | undefined;
  const metrics = createMetrics();
  try {
    if (role !== "api") backend = await startPrimary(models, registry);
    if (backend) metrics.setBackendInfo(backend.info);
    beforeWork?.(models);
    const shared = await openState(config, logger, unixNow);
    cluster = await createClusterPlane({ config, models, logger, metrics, ...shared }).catch(async (err) => {
      await shared.ports.close();
      throw err;
    });
  } catch (err) {
    await models.close();
    throw err;
  }
  watchModelBackends(metrics, models);
  metrics.watch(cluster.status);
  const plane = cluster;
  const app = createApp({
    config,
    files: plane.files,
    batches: plane.batches,
    status: plane.status,
    backendInfo: () => backend?.info ?? apiRoleInfo(registry),
    reachable: () => plane.ping(),
    registry,
    modelStatus: () => models.status(),
    logger,
    metrics,
    api: role !== "worker",
  });
  let closed: Promise<void> | undefined;
  return {
    app,
    models,
    cluster: plane,
    metrics,
    close(opts = {}) {
      closed ??= (async () => {
        await plane.close({ graceMs: opts.graceMs ?? 10_000 });
        await models.close();
      })();
      return closed;
    },
  };
}

/** The primary model is up before the service says it is ready; the others come up when a batch needs them. */
async function startPrimary(models: ModelRouter, registry: ModelRegistry): Promise<InferenceBackend> {
  const primary = await models.acquire(registry.fallback ?? registry.models[0].name);
  primary.release();
  return primary.backend;
}

/** /metrics reads each upstream backend's flow control at scrape time. */
function watchModelBackends(metrics: Metrics, models: ModelRouter): void {
  metrics.watchBackends(() => models.backends().flatMap(({ name, backend: b }) => (b.stats ? [{ model: name, stats: b.stats() }] : [])));
}

/** An API server runs no model: it is ready once it has its database; the workers serve the models. */
function apiRoleInfo(registry: ModelRegistry): BackendInfo {
  return {
    model: registry.fallback ?? registry.models[0].name,
    kind: "workers",
    endpoints: SERVED_ENDPOINTS,
    concurrency: 0,
    generatedModel: false,
    settings: { role: "api" },
    summary: "requests run on the workers",
  };
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
  const registry = await loadRegistry(config, logger);
  const models = await createRouter(config, registry, logger);
  let backend: InferenceBackend;
  try {
    backend = await startPrimary(models, registry);
  } catch (err) {
    await models.close();
    throw err;
  }
  const metrics = createMetrics();
  metrics.setBackendInfo(backend.info);
  watchModelBackends(metrics, models);
  const controlPlane = await createControlPlane({ config, models, logger, metrics });
  metrics.watch(controlPlane.status);
  const app = createApp({
    config,
    files: controlPlane.files,
    batches: controlPlane.batches,
    status: controlPlane.status,
    backendInfo: () => backend.info,
    reachable: () => controlPlane.ping(),
    registry,
    modelStatus: () => models.status(),
    logger,
    metrics,
  });
  let closed: Promise<void> | undefined;
  return {
    app,
    backend,
    models,
    controlPlane,
    metrics,
    close(opts = {}) {
      closed ??= (async () => {
        await controlPlane.close({ graceMs: opts.graceMs ?? 10_000 });
        await models.close();
        unlock();
      })();
      return closed;
    },
  };
}
