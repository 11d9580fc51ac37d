// Model choice and engine start-up from the service's Config, shared by the server (api/service.ts)
// and the offline runner (runner/), so both pick the same model and engine settings the same way.
import type pino from "pino";
import type { Config } from "./config.js";
import { createEngine } from "../engine/index.js";
import { ensureGeneratedModel } from "../engine/generated-model.js";
import { LlamaBackend } from "../engine/openai-backend.js";
import type { InferenceBackend } from "../openai/backend.js";
import { withResponses } from "../openai/responses-backend.js";

/** How the warning tells a user to pick a real model; the runner names its --model flag instead. */
const SERVER_HINT = "MODEL_PATH=/models/qwen2.5-0.5b-instruct-q8_0.gguf npm start";

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

/** Resolves the model (warning loudly about the generated one) and brings the local engine up as the backend. */
export async function startBackend(
  config: Pick<Config, "modelPath" | "engine">,
  logger: pino.Logger,
  hint?: string,
): Promise<InferenceBackend> {
  const model = await resolveModelPath(config, logger, hint);
  const engine = await createEngine({
    modelPath: model.path,
    generatedModel: model.generated,
    gpu: config.engine.gpu,
    threads: config.engine.threads,
    sequences: config.engine.sequences,
    contexts: config.engine.contexts,
    contextSize: config.engine.contextSize,
    embeddingContexts: config.engine.embeddingContexts,
    reproducible: config.engine.reproducible,
    log: (msg, fields) => logger.info(fields ?? {}, msg),
  });
  // Responses lines run over the backend's chat endpoint.
  const backend = withResponses(new LlamaBackend(engine));
  logger.info({ backend: backend.info }, "backend ready");
  return backend;
}
