// The model registry and its backends from the service's Config, shared by the server (app/service.ts) and the
// offline runner (runner/), so both route a batch's `model` the same way: MODELS_FILE when set, else the one
// local model of MODEL_PATH (or the generated model), which answers to every name.
import { readFile } from "node:fs/promises";
import type pino from "pino";
import { type Config, ConfigError } from "../config/config.js";
import { deviceMemory, usableRam } from "../engine/device-memory.js";
import { estimateFootprint } from "../engine/footprint.js";
import { ensureGeneratedModel } from "../engine/generated-model.js";
import { createEngine } from "../engine/index.js";
import { LlamaBackend } from "../engine/openai-backend.js";
import { overChat } from "../openai/over-chat.js";
import { UpstreamBackend } from "../upstream/backend.js";
import { type ModelRegistry, ModelsFileError, parseModelsFile, singleModelRegistry } from "./registry.js";
import { type LocalSpec, ModelRouter, type UpstreamSpec } from "./router.js";

/** How the warning tells a user to pick a real model; the runner names its --model flag instead. */
const SERVER_HINT = "MODEL_PATH=/models/qwen2.5-0.5b-instruct-q8_0.gguf npm start";

/** Share of VRAM (with a GPU) or RAM local models may take together when MODEL_MEMORY_MB is not set. */
export const DEFAULT_MODEL_MEMORY_SHARE = 0.75;

type BackendConfig = Pick<Config, "modelPath" | "modelsFile" | "modelMemoryMb" | "modelIdleSeconds" | "engine">;

export async function resolveModelPath(
  config: Pick<Config, "modelPath">,
  logger: pino.Logger,
  hint = SERVER_HINT,
): Promise<{ path: string; generated: boolean }> {
  if (config.modelPath) return { path: config.modelPath, generated: false };
  const generated = await ensureGeneratedModel();
  logger.warn(
    { modelPath: generated },
    "MODEL_PATH is not set: serving the project's GENERATED model with RANDOM weights; its outputs are gibberish. " +
      `Point MODEL_PATH at a real GGUF model, e.g. ${hint}`,
  );
  return { path: generated, generated: true };
}

/** The registry: MODELS_FILE (one ConfigError naming what is wrong), else the one-model form. */
export async function loadRegistry(
  config: BackendConfig,
  logger: pino.Logger,
  env: Record<string, string | undefined> = process.env,
  hint?: string,
): Promise<ModelRegistry> {
  if (config.modelsFile) {
    let text: string;
    try {
      text = await readFile(config.modelsFile, "utf8");
    } catch (err) {
      throw new ConfigError(
        `MODELS_FILE=${config.modelsFile}: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      );
    }
    try {
      const registry = parseModelsFile(text, config.modelsFile, env);
      for (const m of registry.models)
        if (m.backend.kind === "local" && m.backend.generatedPreset) {
          await ensureGeneratedModel({ preset: m.backend.generatedPreset });
          logger.warn(
            { model: m.name },
            `model '${m.name}' is the project's GENERATED model with RANDOM weights: its outputs are gibberish`,
          );
        }
      return registry;
    } catch (err) {
      if (err instanceof ModelsFileError) throw new ConfigError(`MODELS_FILE=${err.message}`);
      throw err;
    }
  }
  const model = await resolveModelPath(config, logger, hint);
  return singleModelRegistry(model.path, model.generated);
}

/**
 * What the local models loaded at once may take: MODEL_MEMORY_MB, else a share of the VRAM of the GPU llama.cpp
 * finds, else of RAM. Probed only where it matters (more than one local model): the probe costs a second.
 */
async function memoryBudget(config: BackendConfig, registry: ModelRegistry, logger: pino.Logger): Promise<number> {
  if (config.modelMemoryMb > 0) return config.modelMemoryMb * 2 ** 20;
  const locals = registry.models.filter((m) => m.backend.kind === "local").length;
  const device = locals > 1 ? await deviceMemory(config.engine.gpu) : { kind: "ram" as const, bytes: usableRam() };
  const bytes = device.bytes * DEFAULT_MODEL_MEMORY_SHARE;
  if (locals > 1) logger.info({ device: device.kind, budget_mb: Math.round(bytes / 2 ** 20) }, "local models share a memory budget");
  return bytes;
}

/** The router over the registry's models: local ones as node-llama-cpp engines, upstream ones over HTTP. */
export async function createRouter(
  config: BackendConfig,
  registry: ModelRegistry,
  logger: pino.Logger,
  env: Record<string, string | undefined> = process.env,
): Promise<ModelRouter> {
  const engineFor = (spec: LocalSpec) => ({
    contextSize: spec.backend.contextSize ?? config.engine.contextSize,
    sequences: spec.backend.sequences ?? config.engine.sequences,
    contexts: spec.backend.contexts ?? config.engine.contexts,
    threads: spec.backend.threads ?? config.engine.threads,
  });
  const log = logger.child({ component: "models" });
  return new ModelRouter({
    registry,
    memoryBudgetBytes: await memoryBudget(config, registry, log),
    // One model has nothing to make room for: it stays loaded.
    idleUnloadMs: registry.models.length > 1 ? config.modelIdleSeconds * 1000 : 0,
    log: (msg, fields) => log.info(fields ?? {}, msg),
    factory: {
      footprint: (spec) => estimateFootprint({ path: spec.backend.path, ...engineFor(spec) }),
      async local(spec, signal) {
        const engine = await createEngine({
          modelPath: spec.backend.path,
          generatedModel: spec.generated ?? false,
          gpu: config.engine.gpu,
          gpuLayers: spec.backend.gpuLayers,
          ...engineFor(spec),
          embeddingContexts: config.engine.embeddingContexts,
          reproducible: config.engine.reproducible,
          prefixCopy: config.engine.prefixCopy,
          build: config.engine.build,
          kvUnified: config.engine.kvUnified,
          signal,
          log: (msg, fields) => log.info({ model: spec.name, ...fields }, msg),
        });
        // Responses lines run over the backend's chat endpoint.
        const backend = overChat(new LlamaBackend(engine, spec.name));
        log.info({ model: spec.name, backend: backend.info }, "backend ready");
        return backend;
      },
      upstream(spec: UpstreamSpec) {
        const u = spec.backend;
        const backend = overChat(
          new UpstreamBackend({
            name: spec.name,
            baseUrls: u.baseUrls,
            model: u.model,
            apiKey: u.apiKeyEnv ? env[u.apiKeyEnv] : undefined,
            minInFlight: u.minInFlight,
            maxInFlight: u.maxInFlight,
            timeoutSeconds: u.timeoutSeconds,
            maxAttempts: u.maxAttempts,
            prefixRouting: u.prefixRouting,
          }),
        );
        log.info({ model: spec.name, backend: backend.info }, "backend ready");
        return backend;
      },
    },
  });
}
