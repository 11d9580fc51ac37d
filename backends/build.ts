// The model registry and its backends from the service's Config, shared by the server (app/service.ts) and the
// offline runner (runner/), so both route a batch's `model` the same way: MODELS_FILE when set, else the one
// local model of MODEL_PATH (or the generated model), which answers to every name. A model named by hf: or a URL is
// downloaded into MODELS_DIR here, at start, before anything loads it.
import { readFile } from "node:fs/promises";
import path from "node:path";
import type pino from "pino";
import { MESSAGES_DIALECT } from "../anthropic/dialect.js";
import { CachingBackend, type CachingOptions } from "../cache/caching-backend.js";
import { adapterIdentity, fileDigest, localIdentity, upstreamIdentity } from "../cache/model-identity.js";
import type { ResultCache } from "../cache/port.js";
import { type Config, ConfigError } from "../config/config.js";
import { downloadedFile, modelRefName, parseModelRef } from "../config/model-ref.js";
import type { LlamaBackend } from "../engine/adapter/openai-backend.js";
import type { Engine } from "../engine/index.js";
import { deviceMemory, usableRam } from "../engine/load/device-memory.js";
import { isFile } from "../engine/load/files.js";
import { estimateFootprint } from "../engine/load/footprint.js";
import { ensureGeneratedModel } from "../engine/load/generated-model.js";
import { ModelFileError } from "../engine/load/gguf-check.js";
import type { DownloadStatus } from "../engine/load/model-download.js";
import { patchKey } from "../engine/load/native.js";
import type { InferenceBackend } from "../openai/backend.js";
import { overChat, RESPONSES_DIALECT } from "../openai/over-chat.js";
import type { UpstreamBackend } from "../upstream/backend.js";
import { engineRecordKey, nodeLlamaCppVersion, readEngineRecord, writeEngineRecord } from "./engine-record.js";
import { LazyBackend } from "./lazy-backend.js";
import { type ModelRegistry, ModelsFileError, parseModelsFile, singleModelRegistry } from "./registry.js";
import { type LocalSpec, ModelLoadError, ModelRouter, type UpstreamSpec } from "./router.js";

export type { DownloadStatus } from "../engine/load/model-download.js";

/** How the warning tells a user to pick a real model; the runner names its --model flag instead. */
const SERVER_HINT = "MODEL_PATH=hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0 npm start";

/** Share of VRAM (with a GPU) or RAM local models may take together when MODEL_MEMORY_MB is not set. */
export const DEFAULT_MODEL_MEMORY_SHARE = 0.75;

/** Responses and Anthropic's Messages lines run over a backend's chat endpoint, where it does not serve them itself. */
const servedOverChat = (backend: InferenceBackend) => overChat(backend, [RESPONSES_DIALECT, MESSAGES_DIALECT]);

type BackendConfig = Pick<Config, "modelPath" | "modelsFile" | "modelMemoryMb" | "modelIdleSeconds" | "engine">;
type FetchConfig = Pick<Config, "modelsDir" | "hfEndpoint" | "hfToken">;

export interface RegistryOptions {
  env?: Record<string, string | undefined>;
  /** How the generated model's warning names the way to a real one. */
  hint?: string;
  /**
   * False where no model runs here (an API server): downloads' references are kept, nothing is fetched. "present":
   * nothing is fetched either, but a download already in MODELS_DIR stands for its reference.
   */
  fetch?: boolean | "present";
  /** What the one-line errors tell the user to set to a local file instead (MODEL_PATH, --model). */
  setting?: string;
  /** Each download's progress (the start-up /ready). */
  onDownload?: (status: DownloadStatus) => void;
  signal?: AbortSignal;
}

/** The file of the one model: MODEL_PATH's (downloaded first where it names one), else the generated model. */
export async function resolveModelPath(
  config: Pick<Config, "modelPath"> & FetchConfig,
  logger: pino.Logger,
  options: RegistryOptions = {},
): Promise<{ path: string; generated: boolean; name?: string }> {
  if (config.modelPath) {
    const ref = parseModelRef(config.modelPath);
    if (ref.kind === "file") return { path: config.modelPath, generated: false };
    const name = modelRefName(ref);
    return { path: await modelFile(config.modelPath, config, logger, options), generated: false, name };
  }
  const generated = await ensureGeneratedModel();
  logger.warn(
    { modelPath: generated },
    "MODEL_PATH is not set: serving the project's GENERATED model with RANDOM weights; its outputs are gibberish. " +
      `For real answers name a model, e.g. ${options.hint ?? SERVER_HINT} (downloaded once into MODELS_DIR)`,
  );
  return { path: generated, generated: true };
}

/** The registry: MODELS_FILE (one ConfigError naming what is wrong), else the one-model form. */
export async function loadRegistry(
  config: BackendConfig & FetchConfig,
  logger: pino.Logger,
  options: RegistryOptions = {},
): Promise<ModelRegistry> {
  if (!config.modelsFile) {
    const model = await resolveModelPath(config, logger, options);
    return singleModelRegistry(model.path, model.generated, model.name);
  }
  let text: string;
  try {
    text = await readFile(config.modelsFile, "utf8");
  } catch (err) {
    throw new ConfigError(
      `MODELS_FILE=${config.modelsFile}: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  let registry: ModelRegistry;
  try {
    registry = parseModelsFile(text, config.modelsFile, options.env ?? process.env);
  } catch (err) {
    if (err instanceof ModelsFileError) throw new ConfigError(`MODELS_FILE=${err.message}`);
    throw err;
  }
  for (const m of registry.models) {
    if (m.backend.kind !== "local" || m.parent !== undefined) continue;
    if (m.backend.generatedPreset) {
      await ensureGeneratedModel({ preset: m.backend.generatedPreset });
      logger.warn({ model: m.name }, `model '${m.name}' is the project's GENERATED model with RANDOM weights: its outputs are gibberish`);
    } else if (options.fetch !== false && parseModelRef(m.backend.path).kind !== "file") {
      // Every download at start, one after another: a batch never waits for one, and a bad reference stops the start.
      m.backend.path = await modelFile(m.backend.path, config, logger, {
        ...options,
        setting: `the path of model '${m.name}' in MODELS_FILE`,
      });
    }
  }
  await checkAdapters(registry, config.modelsFile, options.fetch !== false && options.fetch !== "present");
  return registry;
}

/** Each adapter on its base's file (fetched by now), refused in one line naming both where it does not fit. */
async function checkAdapters(registry: ModelRegistry, source: string, local: boolean): Promise<void> {
  for (const m of registry.models) {
    if (m.parent === undefined || m.backend.kind !== "local" || !m.backend.adapter) continue;
    const base = registry.get(m.parent)!.backend as LocalSpec["backend"];
    m.backend.path = base.path;
    // An API server loads nothing: the workers check what they serve.
    if (!local) continue;
    const { AdapterFileError, loraMismatch } = await import("../engine/load/lora-check.js");
    const why = await loraMismatch(base.path, m.backend.adapter.path).catch((err: Error) => {
      if (!(err instanceof AdapterFileError)) throw err;
      throw new ConfigError(`MODELS_FILE=${source}: adapter '${m.name}': ${err.message}`);
    });
    if (why) {
      throw new ConfigError(
        `MODELS_FILE=${source}: adapter '${m.name}' (${m.backend.adapter.path}) does not fit its base '${m.parent}' (${base.path}): ${why}`,
      );
    }
  }
}

/** A download's reference as a file, as `options.fetch` allows: fetched, already present, or kept as given. */
async function modelFile(ref: string, config: FetchConfig, logger: pino.Logger, options: RegistryOptions): Promise<string> {
  if (options.fetch === false) return ref;
  if (options.fetch !== "present") return fetchOne(ref, config, logger, options);
  const parsed = parseModelRef(ref);
  if (parsed.kind === "file") return ref;
  const file = downloadedFile(config.modelsDir, parsed);
  return (await isFile(file)) ? file : ref;
}

/** A download's file in MODELS_DIR, its progress logged; a failure is one ConfigError line. */
async function fetchOne(ref: string, config: FetchConfig, logger: pino.Logger, options: RegistryOptions): Promise<string> {
  const log = logger.child({ component: "models" });
  // Loaded for a download only: with its lock-file library it costs a start about 17 ms that a local file never needs.
  const { fetchModel, ModelDownloadError } = await import("../engine/load/model-download.js");
  try {
    return await fetchModel(ref, {
      dir: config.modelsDir,
      hfEndpoint: config.hfEndpoint,
      hfToken: config.hfToken || undefined,
      setting: options.setting ?? "MODEL_PATH",
      onStatus: options.onDownload,
      log: (msg, fields) => log.info(fields ?? {}, msg),
      signal: options.signal,
    });
  } catch (err) {
    if (err instanceof ModelDownloadError || err instanceof ModelFileError) throw new ConfigError(err.message);
    throw err;
  }
}

/**
 * What the local models loaded at once may take: MODEL_MEMORY_MB, else a share of the VRAM of the GPU llama.cpp
 * finds, else of RAM. Probed only where it matters (more than one local model): the probe costs a second.
 */
async function memoryBudget(config: BackendConfig, registry: ModelRegistry, logger: pino.Logger): Promise<number> {
  if (config.modelMemoryMb > 0) return config.modelMemoryMb * 2 ** 20;
  const locals = registry.models.filter((m) => m.backend.kind === "local" && m.parent === undefined).length;
  const device = locals > 1 ? await deviceMemory(config.engine.gpu) : { kind: "ram" as const, bytes: usableRam() };
  const bytes = device.bytes * DEFAULT_MODEL_MEMORY_SHARE;
  if (locals > 1) logger.info({ device: device.kind, budget_mb: Math.round(bytes / 2 ** 20) }, "local models share a memory budget");
  return bytes;
}

/** The engine's modules, once a local model has loaded them. */
let engineModules: { createEngine: typeof import("../engine/index.js").createEngine; LlamaBackend: typeof LlamaBackend } | undefined;

/**
 * The engine's modules, imported when a local model first loads rather than with this file: node-llama-cpp takes
 * most of a second to import, which a run answered wholly from the result cache need not pay.
 */
async function loadEngineModules() {
  if (!engineModules) {
    const [{ createEngine }, { LlamaBackend }] = await Promise.all([
      import("../engine/index.js"),
      import("../engine/adapter/openai-backend.js"),
    ]);
    engineModules = { createEngine, LlamaBackend };
  }
  return engineModules;
}

/** The result cache every backend is wrapped with (RESULT_CACHE on), and where local models' digests are remembered. */
export interface BackendCache {
  cache: ResultCache;
  /** The sidecar of model files' digests (cache/model-identity.ts). */
  sidecar: string;
  onOutcome?: CachingOptions["onOutcome"];
  onStoreError?: CachingOptions["onStoreError"];
  /**
   * A local model may wait for its first request the cache cannot answer before it loads, where the engine it
   * loads is on record (backends/engine-record.ts): a run whose every line is remembered loads no model.
   */
  lazyLoad?: boolean;
  /** A lazy load that failed: told before the requests waiting for it hear of it, so a run can stop first. */
  onLazyLoadFailure?: (err: Error) => void;
  /** A lazy load done: how long it took. */
  onLazyLoaded?: (ms: number) => void;
}

/** What changes a local backend's answers besides its weights, from what it says of itself. */
export function engineIdentity(backend: InferenceBackend, flashAttention: boolean | "auto") {
  const s = backend.info.settings;
  const build = String(s.engineBuild);
  const settings = {
    contextSize: s.contextSize,
    reproducible: s.reproducible,
    kvUnified: s.kvUnified,
    gpu: s.gpu,
    gpuLayers: s.gpuLayers,
    chatWrapper: s.chatWrapper,
    // Only where FLASH_ATTENTION is set: the default's answers keep the keys they were stored under before it existed.
    ...(flashAttention === "auto" ? {} : { flashAttention }),
  };
  return { nodeLlamaCpp: nodeLlamaCppVersion(), build, patchKey: build === "patched" ? patchKey() : null, settings };
}

/** The backend answering deterministic requests once (cache/caching-backend.ts), where a cache is given. */
function cached(backend: InferenceBackend, identity: Promise<string | null> | string, cache: BackendCache | undefined): InferenceBackend {
  if (!cache) return backend;
  return new CachingBackend(backend, { cache: cache.cache, identity, onOutcome: cache.onOutcome, onStoreError: cache.onStoreError });
}

/** A LoRA adapter served by its loaded base's engine; its answers cached under its base's identity, its file and scale. */
function adapterBackend(
  spec: LocalSpec,
  engines: Map<string, Engine>,
  identities: Map<string, Promise<string | null> | string>,
  resultCache: BackendCache | undefined,
): InferenceBackend {
  const engine = engines.get(spec.parent!);
  const adapter = spec.backend.adapter!;
  if (!engine?.withAdapter) throw new Error(`its base '${spec.parent}' is not loaded here`);
  const served = servedOverChat(
    new engineModules!.LlamaBackend(engine.withAdapter({ name: spec.name, path: adapter.path, scale: adapter.scale }), spec.name),
  );
  // An adapter file that cannot be hashed leaves the adapter uncached: its requests compute.
  const base = identities.get(spec.parent!);
  const identity =
    resultCache && base
      ? Promise.all([base, fileDigest(adapter.path, resultCache.sidecar).catch(() => null)]).then(
          ([b, a]) => b && a && adapterIdentity(b, a, adapter.scale),
        )
      : "";
  return cached(served, identity, resultCache);
}

/** An upstream model over HTTP, its answers cached under its base URLs and model name. */
function upstreamBackend(
  Upstream: typeof UpstreamBackend,
  spec: UpstreamSpec,
  env: Record<string, string | undefined>,
  resultCache: BackendCache | undefined,
): InferenceBackend {
  const u = spec.backend;
  const upstream = new Upstream({
    name: spec.name,
    baseUrls: u.baseUrls,
    model: u.model,
    apiKey: u.apiKeyEnv ? env[u.apiKeyEnv] : undefined,
    minInFlight: u.minInFlight,
    maxInFlight: u.maxInFlight,
    timeoutSeconds: u.timeoutSeconds,
    maxAttempts: u.maxAttempts,
    prefixRouting: u.prefixRouting,
  });
  return cached(servedOverChat(upstream), upstreamIdentity(u.baseUrls, u.model), resultCache);
}

/** What a local model's engine is built from, besides its own spec: the settings, the shared maps, the cache. */
interface LocalContext {
  config: BackendConfig;
  log: pino.Logger;
  budget: number;
  registry: ModelRegistry;
  /** Each loaded base's engine, which its adapters are served by. */
  engines: Map<string, Engine>;
  /** Each local model's result-cache identity, which its adapters' identities build on. */
  identities: Map<string, Promise<string | null> | string>;
  resultCache: BackendCache | undefined;
  /** Each local model's engine record, looked up once (backends/engine-record.ts). */
  records: Map<string, ReturnType<typeof findRecord>>;
}

/** The engine settings a local model asks for: its own, else the service's. */
function engineSettings(config: BackendConfig, spec: LocalSpec) {
  return {
    contextSize: spec.backend.contextSize ?? config.engine.contextSize,
    sequences: spec.backend.sequences ?? config.engine.sequences,
    contexts: spec.backend.contexts ?? config.engine.contexts,
    threads: spec.backend.threads ?? config.engine.threads,
  };
}

/** A local model's engine brought up and served, and its answers' identity (a promise while its file is hashed). */
async function loadLocal(ctx: LocalContext, spec: LocalSpec, signal: AbortSignal, digest: Promise<string | null> | undefined) {
  const { config, log } = ctx;
  const own = engineSettings(config, spec);
  const { createEngine, LlamaBackend } = await loadEngineModules();
  const footprint = await estimateFootprint({ path: spec.backend.path, ...own });
  const engine = await createEngine({
    modelPath: spec.backend.path,
    generatedModel: spec.generated ?? false,
    gpu: config.engine.gpu,
    gpuLayers: spec.backend.gpuLayers,
    ...own,
    embeddingContexts: config.engine.embeddingContexts,
    reproducible: config.engine.reproducible,
    prefixCopy: config.engine.prefixCopy,
    build: config.engine.build,
    kvUnified: config.engine.kvUnified,
    flashAttention: config.engine.flashAttention,
    // Adapters' contexts take what the budget leaves beside the base (one adapter's always fit).
    adapterMemoryBytes: Math.max(0, ctx.budget - footprint),
    signal,
    log: (msg, fields) => log.info({ model: spec.name, ...fields }, msg),
  });
  ctx.engines.set(spec.name, engine);
  const local = servedOverChat(new LlamaBackend(engine, spec.name));
  const identity = digest ? digest.then((d) => d && localIdentity(d, engineIdentity(local, config.engine.flashAttention))) : "";
  return { local, identity, footprint };
}

/** The key of a local model's engine record: what it asks of the engine, as asked (backends/engine-record.ts). */
function recordKey(ctx: Pick<LocalContext, "config">, spec: LocalSpec, digest: string): string {
  const { engine } = ctx.config;
  const asked = {
    name: spec.name,
    path: spec.backend.path,
    generated: spec.generated ?? false,
    gpuLayers: spec.backend.gpuLayers ?? null,
    ...engineSettings(ctx.config, spec),
    engine: { ...engine, contextSize: undefined, sequences: undefined, contexts: undefined, threads: undefined },
    patchKey: patchKey(),
  };
  return engineRecordKey(digest, asked);
}

/** A local model's engine record, where its load may wait: the cache allows it and the model has no adapters. */
function lazyRecord(ctx: LocalContext, spec: LocalSpec) {
  let found = ctx.records.get(spec.name);
  if (!found) {
    found = findRecord(ctx, spec);
    ctx.records.set(spec.name, found);
  }
  return found;
}

async function findRecord(ctx: Pick<LocalContext, "config" | "registry" | "resultCache" | "log">, spec: LocalSpec) {
  const cache = ctx.resultCache;
  if (!cache?.lazyLoad || ctx.registry.models.some((m) => m.parent === spec.name)) return undefined;
  const digest = await fileDigest(spec.backend.path, cache.sidecar).catch(() => null);
  if (!digest) return undefined;
  const key = recordKey(ctx, spec, digest);
  const file = recordsFile(cache);
  const { record, damaged } = await readEngineRecord(file, key, digest);
  if (damaged) ctx.log.warn({ file }, `${file} ${damaged}: the model loads at once, and the file is written anew`);
  // Without a record, where a load then writes one.
  return { cache, key, file, record };
}

/** A local model served by an engine loaded at its first request the result cache cannot answer; undefined: it loads now. */
async function lazyLocal(ctx: LocalContext, spec: LocalSpec, signal: AbortSignal, digest: Promise<string | null>) {
  const found = await lazyRecord(ctx, spec);
  if (!found?.record) return undefined;
  const { cache, key, file, record } = found;
  const lazy = new LazyBackend(record.info, async () => {
    const started = performance.now();
    try {
      const { local, identity, footprint } = await loadLocal(ctx, spec, signal, digest);
      const actual = await identity;
      cache.onLazyLoaded?.(performance.now() - started);
      // The file may have been replaced since the run began: what loaded must still be the content hashed then.
      const now = await fileDigest(spec.backend.path, cache.sidecar).catch(() => null);
      if (now !== (await digest)) {
        await local.close();
        throw new Error("the model file changed while the run used it: run again");
      }
      if (actual === record.identity) return local;
      // Loaded on what the record did not capture (a driver installed): its answers are not under this key.
      if (actual) await writeEngineRecord(file, key, { identity: actual, info: local.info, footprint }).catch(() => undefined);
      await local.close();
      throw new Error(
        "the engine that came up is not the one the result cache recorded for this model file (its build, GPU or chat template changed); the record is replaced: run again",
      );
    } catch (err) {
      const failed = new ModelLoadError(spec.name, err);
      cache.onLazyLoadFailure?.(failed);
      throw failed;
    }
  });
  ctx.identities.set(spec.name, record.identity);
  ctx.log.info(
    { model: spec.name, backend: record.info },
    "backend ready: the model loads at its first request the result cache cannot answer",
  );
  return cached(lazy, record.identity, cache);
}

/** What a local model will take in memory: its engine record's figure where its load may wait, else its file's estimate. */
async function localFootprint(ctx: LocalContext, spec: LocalSpec): Promise<number> {
  const found = await lazyRecord(ctx, spec);
  return found?.record?.footprint ?? estimateFootprint({ path: spec.backend.path, ...engineSettings(ctx.config, spec) });
}

/** Where the engine records are kept: beside the model digests' sidecar. */
const recordsFile = (cache: BackendCache) => path.join(path.dirname(cache.sidecar), "engines.json");

/** A local model's engine, loaded now or at its first request the cache cannot answer. */
async function localBackend(ctx: LocalContext, spec: LocalSpec, signal: AbortSignal): Promise<InferenceBackend> {
  const cache = ctx.resultCache;
  // Hashed while the model loads; a request that may be cached waits for it (a once-per-file cost, remembered).
  // A file that cannot be hashed leaves its model uncached, said once; its requests compute.
  const digest = cache
    ? fileDigest(spec.backend.path, cache.sidecar).catch((err) => {
        ctx.log.warn({ model: spec.name, err: (err as Error).message }, "the model file cannot be hashed: its answers are not cached");
        return null;
      })
    : undefined;
  const lazy = digest ? await lazyLocal(ctx, spec, signal, digest) : undefined;
  if (lazy) return lazy;
  const { local, identity, footprint } = await loadLocal(ctx, spec, signal, digest);
  ctx.identities.set(spec.name, identity);
  // What came up is recorded, so that a later run answered wholly from the cache need not load it (the runner's: a
  // server loads its models at start).
  const found = await lazyRecord(ctx, spec);
  if (found)
    void Promise.resolve(identity)
      .then(async (id) => {
        if (id) await writeEngineRecord(found.file, found.key, { identity: id, info: local.info, footprint });
      })
      .catch((err: Error) =>
        ctx.log.warn(
          { err: err.message },
          `${found.file} cannot be written (${err.message}): a run answered wholly from the cache will load the model`,
        ),
      );
  const backend = cached(local, identity, cache);
  ctx.log.info({ model: spec.name, backend: backend.info }, "backend ready");
  return backend;
}

/**
 * Each model's identity in the result cache as a run keys its answers, known without loading anything: a local
 * model's from its engine record, an upstream's from its URLs and name. Undefined where one is not (no record yet,
 * a model with adapters, a file that cannot be hashed): what is keyed on them all then has no key.
 */
export async function knownIdentities(
  config: BackendConfig,
  registry: ModelRegistry,
  cache: BackendCache,
  logger: pino.Logger,
): Promise<Record<string, string> | undefined> {
  const ctx = { config, registry, resultCache: { ...cache, lazyLoad: true }, log: logger };
  const identities: Record<string, string> = {};
  for (const spec of registry.models) {
    if (spec.backend.kind === "upstream") {
      identities[spec.name] = upstreamIdentity(spec.backend.baseUrls, spec.backend.model);
      continue;
    }
    // An adapter's identity builds on its loaded base's: a base with adapters keeps no record.
    const found = spec.parent === undefined ? await findRecord(ctx, spec as LocalSpec) : undefined;
    if (!found?.record) return undefined;
    identities[spec.name] = found.record.identity;
  }
  return identities;
}

/** The router over the registry's models: local ones as node-llama-cpp engines, upstream ones over HTTP. */
export async function createRouter(
  config: BackendConfig,
  registry: ModelRegistry,
  logger: pino.Logger,
  env: Record<string, string | undefined> = process.env,
  resultCache?: BackendCache,
): Promise<ModelRouter> {
  const log = logger.child({ component: "models" });
  const ctx: LocalContext = {
    config,
    log,
    budget: await memoryBudget(config, registry, log),
    registry,
    engines: new Map(),
    identities: new Map(),
    resultCache,
    records: new Map(),
  };
  // Its HTTP client is imported only where an upstream is served.
  const upstreams = registry.models.some((m) => m.backend.kind === "upstream") ? await import("../upstream/backend.js") : null;
  return new ModelRouter({
    registry,
    memoryBudgetBytes: ctx.budget,
    // One model has nothing to make room for: it stays loaded.
    idleUnloadMs: registry.models.filter((m) => m.parent === undefined).length > 1 ? config.modelIdleSeconds * 1000 : 0,
    log: (msg, fields) => log.info(fields ?? {}, msg),
    factory: {
      footprint: (spec) => localFootprint(ctx, spec),
      local: (spec, signal) => localBackend(ctx, spec, signal),
      adapter: (spec) => adapterBackend(spec, ctx.engines, ctx.identities, resultCache),
      upstream(spec: UpstreamSpec) {
        const backend = upstreamBackend(upstreams!.UpstreamBackend, spec, env, resultCache);
        log.info({ model: spec.name, backend: backend.info }, "backend ready");
        return backend;
      },
    },
  });
}
