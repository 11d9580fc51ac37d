// The composition root: config -> model registry and backends -> control plane -> HTTP app. The one builder of
// the service in either mode: without DATABASE_URL everything in one process on BATCH_DIR; with it one ROLE of
// the distributed mode. app/main.ts listens on what it builds; integration tests drive it through supertest.

import type express from "express";
import type pino from "pino";
import { createApp } from "../api/http/app.js";
import { purgeOf } from "../api/routes/cache.js";
import { type BackendCache, createRouter, type DownloadStatus, loadRegistry } from "../backends/build.js";
import { ModelRegistry, promptsOverLimit } from "../backends/registry.js";
import type { ModelRouter } from "../backends/router.js";
import { DEFAULT_MAX_BYTES_CEILING, digestsFile, openEmbeddedCache } from "../cache/open.js";
import type { ResultCache } from "../cache/port.js";
import type { Config } from "../config/config.js";
import { KeyRing } from "../config/keys.js";
import { createMetrics, type Metrics } from "../metrics/metrics.js";
import { Series } from "../metrics/series.js";
import { type BackendInfo, ENDPOINTS, type InferenceBackend } from "../openai/backend.js";
import { lockBatchDir } from "./batch-dir-lock.js";
import { buildControlPlane, type ControlPlane, followsWorkers, processId } from "./control-plane.js";
import { blobStoreFor, embeddedState, openSharedState, type PlaneState } from "./plane-state.js";

export interface Service {
  app: express.Express;
  /** The primary model's backend (the default model, else the first in the registry); none with ROLE=api. */
  backend?: InferenceBackend;
  models: ModelRouter;
  controlPlane: ControlPlane;
  /** This instance's Prometheus registry and hooks (GET /metrics). */
  metrics: Metrics;
  /** From now on /ready answers 503 (shutting_down), while every other route goes on serving. */
  drain(): void;
  /** Stops the workers (running batches checkpoint), then releases the models. */
  close(opts?: { graceMs?: number }): Promise<void>;
}

export interface ServiceOptions {
  /**
   * Opens the control plane's state. By default it follows the config: BATCH_DIR's files (the embedded mode), or
   * PostgreSQL and the blob store DATABASE_URL and S3_* name.
   */
  openState?: (config: Config, logger: pino.Logger, models: ModelRouter) => Promise<PlaneState>;
  /**
   * Opens the result cache where RESULT_CACHE is on. By default it follows the config: LMDB in BATCH_DIR/cache/, or
   * PostgreSQL's table with DATABASE_URL. A state opened elsewhere (one process's memory) brings its own.
   */
  openCache?: (config: Config) => Promise<OpenedCache>;
  /** Each model download's progress, while the models are fetched at start (the start-up /ready shows it). */
  onDownload?: (status: DownloadStatus) => void;
  /** Sees the model router once the primary model is up and before any worker can claim (tests count engine calls). */
  beforeWork?: (models: ModelRouter) => void;
}

const defaultState = (config: Config, logger: pino.Logger, models: ModelRouter) =>
  config.cluster.databaseUrl ? openSharedState(config, logger) : embeddedState(config, models, logger);

export async function buildService(config: Config, logger: pino.Logger, options: ServiceOptions = {}): Promise<Service> {
  // One process owns BATCH_DIR in the embedded mode; a second would run its batches twice.
  const unlock = config.cluster.databaseUrl
    ? () => {}
    : lockBatchDir(config.batchDir, (err, file) =>
        logger.warn({ err, file }, "the server lock could not be removed (the next start takes it over): shutting down anyway"),
      );
  try {
    return await compose(config, logger, options, unlock);
  } catch (err) {
    unlock();
    throw err;
  }
}

async function compose(config: Config, logger: pino.Logger, options: ServiceOptions, unlock: () => void): Promise<Service> {
  const { openState = defaultState, beforeWork } = options;
  const apiOnly = config.cluster.role === "api";
  // Each process of the distributed mode labels its samples, so a sum over them keeps who counted what.
  const metrics = createMetrics(config.cluster.databaseUrl ? { labels: { process: processId(config) } } : {});
  const { registry, models, results } = await openModels(config, logger, options, metrics);
  let backend: InferenceBackend | undefined;
  let controlPlane: ControlPlane;
  let state: PlaneState | undefined;
  try {
    // The state first: a database or a store that cannot be used is said at once, not after a model load of minutes.
    state = await openState(config, logger, models);
    if (!apiOnly) backend = await startPrimary(models, registry);
    if (backend) metrics.setBackendInfo(backend.info);
    beforeWork?.(models);
    controlPlane = await buildControlPlane({ config, models, logger, metrics, state });
  } catch (err) {
    await state?.ports.close();
    await models.close();
    await results?.cache.close();
    throw err;
  }
  watchModelBackends(metrics, models);
  const plane = controlPlane;
  watchPlane(metrics, plane);
  const series = startSeries(metrics, plane);
  let draining = false;
  const app = createApp({
    config,
    draining: () => draining,
    storage: () => plane.storage(),
    storageFault: (err) => plane.storageFault(err),
    files: plane.files,
    uploads: plane.uploads,
    batches: plane.batches,
    views: plane.views,
    datasets: plane.datasets,
    inference: plane.inference,
    syncTargets: plane.syncTargets,
    organization: plane.organization,
    status: plane.status,
    backendInfo: () => backend?.info ?? apiRoleInfo(registry),
    reachable: () => plane.ping(),
    registry,
    modelStatus: () => models.status(),
    upstreams: () => upstreamStats(models),
    series: () => series.list(),
    logger,
    metrics,
    api: config.cluster.role !== "worker",
    ...(results ? { resultCachePurge: purgeOf(results.cache, new KeyRing(config.keys)) } : {}),
  });
  let closed: Promise<void> | undefined;
  return {
    app,
    backend,
    models,
    controlPlane: plane,
    metrics,
    drain() {
      draining = true;
    },
    close(opts = {}) {
      closed ??= (async () => {
        series.stop();
        await plane.close({ graceMs: opts.graceMs ?? 10_000 });
        await models.close();
        await results?.cache.close();
        unlock();
      })();
      return closed;
    },
  };
}

/**
 * The model registry and its router. An API server runs no model, so what loading one would warn about (a generated
 * model) is not its concern; one given no models at all takes its workers' (batches/served-models.ts).
 */
async function openModels(config: Config, logger: pino.Logger, options: ServiceOptions, metrics: Metrics) {
  const apiOnly = config.cluster.role === "api";
  const registry = followsWorkers(config)
    ? new ModelRegistry([])
    : await loadRegistry(config, apiOnly ? logger.child({}, { level: "error" }) : logger, {
        fetch: !apiOnly,
        onDownload: options.onDownload,
      });
  // An API server runs no model, but purges the cache its workers share (DELETE /v1/cache).
  const results = await openResultCache(config, logger, metrics, options.openCache);
  const models = await createRouter(config, registry, logger, process.env, apiOnly ? undefined : results).catch(async (err) => {
    await results?.cache.close();
    throw err;
  });
  for (const over of promptsOverLimit(registry, config.engine.contextSize, config.maxLineBytes))
    logger.warn(
      { ...over, maxLineBytes: config.maxLineBytes },
      "a full-context prompt of this model may be longer than MAX_LINE_BYTES: such a request or batch line is refused; raise MAX_LINE_BYTES",
    );
  return { registry, models, results };
}

/** /metrics reads the control plane's queue, pools, leadership, totals and keys at scrape time. */
function watchPlane(metrics: Metrics, plane: ControlPlane): void {
  const { status, maintenance } = plane;
  metrics.watch({
    queueStats: () => status.queueStats(),
    poolStatus: () => status.poolStatus(),
    leader: () => maintenance.leader,
    totals: () => plane.totals(),
    keyName: (owner) => plane.organization.keyId(owner) ?? "-",
    enqueued: async () => {
      const keys = await plane.organization.keys();
      return keys.flatMap((k) => Object.entries(k.enqueued_tokens).map(([model, tokens]) => ({ key: k.id, model, tokens })));
    },
  });
}

/** The recent history of totals, queue depth and pools the console draws, sampled from now on. */
function startSeries(metrics: Metrics, plane: ControlPlane): Series {
  const series = new Series({
    totals: () => metrics.totals(),
    queueDepth: async () => (await plane.status.queueStats()).depth,
    pools: () => Promise.resolve(plane.status.poolStatus()),
  });
  series.start();
  return series;
}

/**
 * The result cache (RESULT_CACHE on) where models run (docs/cache.md): LMDB in BATCH_DIR/cache/, or in the distributed
 * mode the table every worker shares (its default bound the ceiling: the database's disk is not this process's).
 */
async function openResultCache(
  config: Config,
  logger: pino.Logger,
  metrics: Metrics,
  open?: ServiceOptions["openCache"],
): Promise<BackendCache | undefined> {
  if (!config.resultCache.enabled) return undefined;
  const log = logger.child({ component: "result-cache" });
  const url = config.cluster.databaseUrl;
  const opened = open
    ? await open(config)
    : url
      ? await sharedCache(url, config, log)
      : await openEmbeddedCache(config.batchDir, config.resultCache);
  if (opened.damaged) log.warn(opened.damaged);
  log.info({ max_bytes: opened.maxBytes, ttl_seconds: config.resultCache.ttlSeconds }, "result cache open");
  metrics.watchResultCache(() => opened.cache.stats());
  return {
    ...opened,
    onOutcome: (answer, model) => metrics.cacheAnswer(answer, model),
    onStoreError: (err) => log.warn({ err }, "the result cache failed a read or a write: the request computed"),
  };
}

/** A result cache and where the model files' digests are remembered beside it. */
export interface OpenedCache {
  cache: ResultCache;
  sidecar: string;
  maxBytes: number;
  /** Why the store was found unreadable after an unclean stop and started empty (cache/lmdb-check.ts). */
  damaged?: string;
}

async function sharedCache(url: string, config: Config, log: pino.Logger): Promise<OpenedCache> {
  // Large answers go to the blob store the batches' files are in (S3, or BATCH_DIR as a shared folder).
  const blobs = await blobStoreFor(config);
  const [{ createPool }, { PgResultCache }] = await Promise.all([import("../postgres/db.js"), import("../postgres/result-cache.js")]);
  const pool = createPool(url, log, 4);
  const maxBytes = config.resultCache.maxBytes || DEFAULT_MAX_BYTES_CEILING;
  const release = async () => {
    blobs.close?.();
    await pool.end();
  };
  const cache = new PgResultCache(pool, { maxBytes, ttlSeconds: config.resultCache.ttlSeconds }, Date.now, release, { blobs });
  return { cache, sidecar: digestsFile(config.batchDir), maxBytes };
}

/** The primary model is up before the service says it is ready; the others come up when a batch needs them. */
async function startPrimary(models: ModelRouter, registry: ModelRegistry): Promise<InferenceBackend> {
  const primary = await models.acquire(registry.fallback ?? registry.models[0].name);
  primary.release();
  return primary.backend;
}

/** /metrics reads each upstream backend's flow control at scrape time. */
function watchModelBackends(metrics: Metrics, models: ModelRouter): void {
  metrics.watchBackends(() => upstreamStats(models));
  metrics.watchPreemptions(() =>
    models.backends().flatMap(({ name, backend: b }) => (b.preemptions ? [{ model: name, count: b.preemptions() }] : [])),
  );
}

/** Each backend with flow control of its own (the upstream ones), by model: for /metrics and the console. */
const upstreamStats = (models: ModelRouter) =>
  models.backends().flatMap(({ name, backend: b }) => (b.stats ? [{ model: name, stats: b.stats() }] : []));

/** An API server runs no model: it is ready once it has its database; the workers serve the models. */
function apiRoleInfo(registry: ModelRegistry): BackendInfo {
  return {
    model: registry.fallback ?? registry.models[0]?.name ?? "",
    kind: "workers",
    endpoints: ENDPOINTS,
    concurrency: 0,
    generatedModel: false,
    settings: { role: "api" },
    summary: "requests run on the workers",
  };
}
