// Bringing up llama.cpp (the compute backend) and the model. Never builds from source at start: the patched
// build scripts/build-engine.sh made (native.ts) where it exists, else the prebuilt binaries shipped with
// node-llama-cpp, and a machine without a usable GPU gets the CPU build.
import { access, constants } from "node:fs/promises";
import { getLlama, type Llama, LlamaLogLevel, type LlamaModel } from "node-llama-cpp";
import type { EngineOptions } from "../types.js";
import { detachBinaryTests } from "./binary-test.js";
import { checkGgufFile } from "./gguf-check.js";
import { buildSelection, defaultBuildChoice, type EngineBuildChoice, loadedBuild, missingPatchedBuild } from "./native.js";

type Log = NonNullable<EngineOptions["log"]>;

/**
 * With a unified KV cache llama.cpp compares the whole buffer (every sequence's cells) with the model's training
 * context; each sequence still holds only its own contextSize, which createEngine checks.
 */
const UNIFIED_CONTEXT_WARNING = /^llama_context: n_ctx_seq \(\d+\) > n_ctx_train \(\d+\) -- possible training context overflow$/;

/** llama.cpp's own messages at warn level and above go to the engine log; the rest is noise here. */
function llamaLogger(log: Log) {
  return (level: LlamaLogLevel, message: string) => {
    const text = message.trim();
    if (text && !UNIFIED_CONTEXT_WARNING.test(text)) log(`llama.cpp: ${text}`, { llamaLogLevel: level });
  };
}

async function tryGetLlama(gpu: "auto" | "cuda" | "vulkan" | false, log: Log, build: EngineBuildChoice, debug: boolean): Promise<Llama> {
  detachBinaryTests();
  return getLlama({
    ...buildSelection(build),
    build: "never",
    skipDownload: true,
    gpu,
    logLevel: debug ? LlamaLogLevel.debug : LlamaLogLevel.warn,
    logger: llamaLogger(log),
    // Thread use is decided later from the cores this binding reports (see engine/load/threads.ts).
    progressLogs: false,
  });
}

/**
 * "auto" lets node-llama-cpp try the GPU backends it detects (CUDA, then Vulkan) and fall back to CPU.
 * A named GPU that cannot be loaded falls back to CPU with a warning rather than refusing to start:
 * slow answers beat none, and `info.gpu` tells the truth. `signal` stops the wait at once (node-llama-cpp's
 * tests of its binaries cannot be stopped: what they bring up afterwards is disposed of).
 */
export async function loadLlama(
  gpu: EngineOptions["gpu"],
  log: Log,
  build: EngineBuildChoice = defaultBuildChoice(),
  llamaDebug = false,
  signal?: AbortSignal,
): Promise<Llama> {
  let llama: Llama;
  try {
    llama = await unlessAborted(tryGetLlama(gpu, log, build, llamaDebug), signal);
  } catch (err) {
    // A stop is not a failed backend: nothing falls back.
    signal?.throwIfAborted();
    if (gpu === false) throw err;
    log(`GPU backend '${gpu}' could not be loaded; falling back to CPU`, { error: err instanceof Error ? err.message : String(err) });
    llama = await unlessAborted(tryGetLlama(false, log, build, llamaDebug), signal);
  }
  const loaded = loadedBuild(llama);
  if (build === "patched" && loaded !== "patched") {
    await llama.dispose();
    throw new Error(missingPatchedBuild());
  }
  const backend = llama.gpu === false ? "CPU" : llama.gpu;
  log(`llama.cpp backend: ${backend}, ${loaded === "patched" ? "patched build (scripts/build-engine.sh)" : "prebuilt binaries"}`, {
    requested: gpu,
    gpu: llama.gpu,
    build: loaded,
    cpuMathCores: llama.cpuMathCores,
  });
  return llama;
}

/** `loading`, or the signal's reason as soon as it aborts; what `loading` brings up after that is disposed of. */
function unlessAborted(loading: Promise<Llama>, signal: AbortSignal | undefined): Promise<Llama> {
  if (!signal) return loading;
  return new Promise<Llama>((resolve, reject) => {
    let settled = false;
    const stop = () => {
      if (settled) return;
      settled = true;
      reject(signal.reason);
      loading.then((llama) => llama.dispose()).catch(() => {});
    };
    if (signal.aborted) return stop();
    signal.addEventListener("abort", stop, { once: true });
    const settle = (then: () => void) => {
      signal.removeEventListener("abort", stop);
      if (settled) return;
      settled = true;
      then();
    };
    loading.then(
      (llama) => settle(() => resolve(llama)),
      (err) => settle(() => reject(err)),
    );
  });
}

export async function loadModel(
  llama: Llama,
  modelPath: string,
  log: Log,
  gpuLayers: number | "auto" = "auto",
  signal?: AbortSignal,
): Promise<LlamaModel> {
  try {
    await access(modelPath, constants.R_OK);
  } catch {
    throw new Error(`Model file not found or not readable: ${modelPath}`);
  }
  // A file that is not a whole GGUF is refused in one line here, rather than in llama.cpp's loader.
  await checkGgufFile(modelPath);
  // "auto" offloads as many layers as the free VRAM holds (all of them for a model that fits).
  // node-llama-cpp stops a load between its steps when the signal aborts, and frees what it had loaded.
  const model = await llama.loadModel({ modelPath, gpuLayers: llama.gpu === false ? 0 : gpuLayers, loadSignal: signal });
  log("model loaded", { modelPath, gpuLayers: model.gpuLayers, sizeBytes: model.size, trainContextSize: model.trainContextSize });
  return model;
}
