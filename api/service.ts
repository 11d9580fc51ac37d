// The composition root: config -> model -> engine -> stores/queue/worker -> HTTP app.
// api/main.ts listens on it; integration tests drive it through supertest.
import type express from "express";
import type pino from "pino";
import type { Config } from "./config.js";
import { createControlPlane } from "./control/index.js";
import { createApp } from "./http/app.js";
import { createEngine } from "../engine/index.js";
import { ensureGeneratedModel } from "../engine/generated-model.js";
import type { Engine } from "../engine/types.js";

export interface Service {
  app: express.Express;
  engine: Engine;
  controlPlane: Awaited<ReturnType<typeof createControlPlane>>;
  /** Stops the worker (running batches checkpoint), then releases the model. */
  close(opts?: { graceMs?: number }): Promise<void>;
}

export async function resolveModelPath(config: Config, logger: pino.Logger): Promise<{ path: string; generated: boolean }> {
  if (config.modelPath) return { path: config.modelPath, generated: false };
  const generated = await ensureGeneratedModel();
  logger.warn(
    { modelPath: generated },
    "MODEL_PATH is not set: serving the project's GENERATED model with RANDOM weights; its outputs are gibberish. " +
      "Point MODEL_PATH at a real GGUF model, e.g. MODEL_PATH=/models/qwen2.5-0.5b-instruct-q8_0.gguf npm start",
  );
  return { path: generated, generated: true };
}

export async function createService(config: Config, logger: pino.Logger): Promise<Service> {
  const model = await resolveModelPath(config, logger);
  const engine = await createEngine({
    modelPath: model.path,
    generatedModel: model.generated,
    gpu: config.engine.gpu,
    threads: config.engine.threads,
    sequences: config.engine.sequences,
    contextSize: config.engine.contextSize,
    embeddingContexts: config.engine.embeddingContexts,
    log: (msg, fields) => logger.info(fields ?? {}, msg),
  });
  logger.info({ engine: engine.info }, "engine ready");
  const controlPlane = await createControlPlane({ config, engine, logger });
  const app = createApp({
    config,
    files: controlPlane.files,
    batches: controlPlane.batches,
    status: controlPlane.status,
    engineInfo: () => engine.info,
    logger,
  });
  let closed: Promise<void> | undefined;
  return {
    app,
    engine,
    controlPlane,
    close(opts = {}) {
      closed ??= (async () => {
        await controlPlane.worker.close({ graceMs: opts.graceMs ?? 10_000 });
        await controlPlane.close();
        await engine.close();
      })();
      return closed;
    },
  };
}
