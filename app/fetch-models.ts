// `--fetch-models`: what MODEL_PATH or the models file names, downloaded into MODELS_DIR, then exit, loading nothing
// (a Kubernetes init container fills the models volume so). Apart from the service, so it imports only the registry.
import type pino from "pino";
import { loadRegistry } from "../backends/build.js";
import type { Config } from "../config/config.js";

export async function fetchModels(config: Config, logger: pino.Logger): Promise<void> {
  await loadRegistry(config, logger);
}
