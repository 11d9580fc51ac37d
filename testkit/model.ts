// The model the tests run on: MODEL_PATH if set, else the shared stories260K beside the repository,
// else the project's generated random-weights model (so tests also run where /work/shared is absent).
import { existsSync } from "node:fs";
import { basename, resolve } from "node:path";
import { repoRoot } from "./repo-root.js";

/**
 * A model from ../shared/models, or undefined where it is absent, or hidden by OBI_TEST_NO_SHARED=1 (CI runs the
 * suite once so, as a fresh clone without ../shared runs it).
 */
export function sharedModel(name: string): string | undefined {
  if (process.env.OBI_TEST_NO_SHARED === "1") return undefined;
  const file = resolve(repoRoot, "../shared/models", name);
  return existsSync(file) ? file : undefined;
}

export async function testModelPath(): Promise<string> {
  if (process.env.OBI_TEST_TIER === "unit")
    throw new Error("a unit test asked for a model: it belongs in the integration tier (vitest.config.ts)");
  if (process.env.MODEL_PATH) return resolve(process.env.MODEL_PATH);
  const shared = sharedModel("stories260K.gguf");
  if (shared) return shared;
  // Imported lazily: it writes the model file on first use.
  const { ensureGeneratedModel } = await import("../engine/load/generated-model.js");
  return ensureGeneratedModel();
}

/** The name the engine serves the test model under (its file's name without .gguf), as batches record it. */
export async function testModelName(): Promise<string> {
  return basename(await testModelPath()).replace(/\.gguf$/i, "");
}

/** The real engine as the integration tests run it: CPU, 1 thread, 4 sequences, a small context, the machine's contexts (unless told otherwise). */
export async function openTestEngine(
  options: { sequences?: number; contextSize?: number; contexts?: number } = {},
): Promise<import("../engine/types.js").Engine> {
  const { createEngine } = await import("../engine/index.js");
  return createEngine({
    modelPath: await testModelPath(),
    generatedModel: false,
    gpu: false,
    threads: 1,
    sequences: options.sequences ?? 4,
    contextSize: options.contextSize ?? 512,
    ...(options.contexts ? { contexts: options.contexts } : {}),
    embeddingContexts: 1,
  });
}

/** The real engine on the generated model (its ChatML template has a tool-call format), as the tool tests run it. */
export async function openGeneratedEngine(sequences = 4): Promise<import("../engine/types.js").Engine> {
  const [{ createEngine }, { ensureGeneratedModel }] = await Promise.all([
    import("../engine/index.js"),
    import("../engine/load/generated-model.js"),
  ]);
  return createEngine({
    modelPath: await ensureGeneratedModel(),
    generatedModel: true,
    gpu: false,
    threads: 1,
    sequences,
    contextSize: 1024,
    embeddingContexts: 1,
  });
}

/**
 * The node-llama-cpp builds this machine can run: the prebuilt binaries always, and the patched build where
 * `npm run build:engine` made it (engine/load/native.ts). Tests that hold for both run once per build.
 */
export async function engineBuilds(): Promise<Array<"prebuilt" | "patched">> {
  const { loadLlama } = await import("../engine/load/load.js");
  try {
    const llama = await loadLlama(false, () => {}, "patched");
    await llama.dispose();
    return ["prebuilt", "patched"];
  } catch {
    return ["prebuilt"];
  }
}

/** Said once by tests that would also run on the patched build, where it is missing. */
export const NO_PATCHED_BUILD =
  "the patched engine is not built here (npm run build:engine; it needs cmake and g++): its tests are skipped, the prebuilt build's run";
