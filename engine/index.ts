// The engine's front door: createEngine brings up llama.cpp, the model and its contexts from EngineOptions.
import { stat } from "node:fs/promises";
import { basename } from "node:path";
import type { Llama, LlamaModel, Token } from "node-llama-cpp";
import { LlamaEngine } from "./engine.js";
import { chooseChatFormat } from "./generate/chat.js";
import { Embedder } from "./generate/embed.js";
import { Grammars } from "./generate/grammars.js";
import { Ranker } from "./generate/rank.js";
import { fullCollection, SamplerMemory, samplerBytes, vocabularySize } from "./generate/sampler-memory.js";
import { estimateFootprint } from "./load/footprint.js";
import { loadLlama, loadModel } from "./load/load.js";
import { loadedBuild } from "./load/native.js";
import { chooseContexts, chooseEmbeddingContexts, chooseThreads, threadBudget, threadsPerContext, threadsText } from "./load/threads.js";
import { KvChoice } from "./pool/kv-choice.js";
import { LoraPools } from "./pool/lora-pools.js";
import { SequencePool, type SequencePoolOptions } from "./pool/sequence-pool.js";
import { autoSequences } from "./pool/sequences.js";
import { parametersPerToken, StepThreads } from "./pool/step-threads.js";
import type { Engine, EngineOptions } from "./types.js";

export { DEFAULT_COMPLETION_MAX_TOKENS } from "./engine.js";
export { chooseThreads, type ThreadsInput, threadBudget, threadsText } from "./load/threads.js";
export { DEFAULT_SEQUENCES } from "./pool/sequences.js";
export * from "./types.js";

/** Width of one attention head: the GGUF's key length, else the embedding width over the head count. */
function headSize(model: LlamaModel): number {
  const meta = model.fileInfo.metadata as Record<string, unknown> & { general?: { architecture?: string } };
  const arch = (meta[meta.general?.architecture ?? ""] ?? {}) as {
    embedding_length?: number;
    attention?: { key_length?: number; head_count?: number | number[] };
  };
  const heads = Array.isArray(arch.attention?.head_count) ? arch.attention.head_count[0] : arch.attention?.head_count;
  return Number(arch.attention?.key_length ?? (arch.embedding_length && heads ? arch.embedding_length / heads : 0));
}

/**
 * As asked, else: on GPU, and on CPU for heads of 32 and wider, llama.cpp decides (there it is faster); narrower
 * heads ran long prompts slower with it (docs/performance.md, "The engine's defaults").
 */
function flashAttentionOf(opts: EngineOptions, plan: Plan, model: LlamaModel): boolean | "auto" {
  const asked = opts.flashAttention ?? "auto";
  if (asked !== "auto") return asked;
  return plan.onGpu || headSize(model) >= 32 ? "auto" : false;
}

export async function createEngine(opts: EngineOptions): Promise<Engine> {
  const log = opts.log ?? (() => {});
  if (!Number.isInteger(opts.contextSize) || opts.contextSize < 16) {
    throw new Error(`contextSize must be an integer >= 16, got ${opts.contextSize}.`);
  }
  const llama = await loadLlama(opts.gpu, log, opts.build, opts.llamaDebugLog ?? false, opts.signal);
  let engine: Engine;
  try {
    opts.signal?.throwIfAborted();
    engine = await assemble(llama, opts, log);
  } catch (err) {
    await llama.dispose();
    throw err;
  }
  // The contexts' creation cannot be stopped midway: a stop that came meanwhile takes what was made down again.
  if (opts.signal?.aborted) {
    await engine.close();
    opts.signal.throwIfAborted();
  }
  return engine;
}

/** How the engine lays out its work before the model loads: the build, the contexts, the KV cache mode and the threads. */
interface Plan {
  onGpu: boolean;
  reproducible: boolean;
  build: ReturnType<typeof loadedBuild>;
  patched: boolean;
  contexts: number;
  kvMode: boolean | "auto";
  threads: number;
}

type Log = NonNullable<EngineOptions["log"]>;

function planOf(llama: Llama, opts: EngineOptions): Plan {
  const onGpu = llama.gpu !== false;
  const reproducible = opts.reproducible ?? false;
  const build = loadedBuild(llama);
  const patched = build === "patched";
  const contexts = reproducible ? 1 : chooseContexts({ cpuCount: llama.cpuMathCores, gpu: onGpu, requested: opts.contexts ?? 0, patched });
  // "auto": chosen per batch run (kv-choice.ts); one sequence (REPRODUCIBLE) has nothing to share a cache with.
  const kvMode = !patched || reproducible ? false : (opts.kvUnified ?? false);
  const threads =
    contexts > 1 && !(opts.threads >= 1)
      ? threadsPerContext(llama.cpuMathCores, contexts)
      : chooseThreads({ cpuCount: llama.cpuMathCores, gpu: onGpu, requested: opts.threads });
  return { onGpu, reproducible, build, patched, contexts, kvMode, threads };
}

/** On CPU with one context, unless a count was asked for, large decodes take every core (threads.ts, step-threads.ts). */
function stepThreadsOf(llama: Llama, model: LlamaModel, opts: EngineOptions, plan: Plan, log: Log): StepThreads | null {
  const { onGpu, contexts, threads } = plan;
  const cores = Math.floor(llama.cpuMathCores);
  const perStep =
    !onGpu && contexts === 1 && !(opts.threads >= 1) && cores > threads
      ? new StepThreads(llama, cores, threads, parametersPerToken(model), llama.maxThreads)
      : null;
  const maxThreads = perStep?.maxThreads ?? threads;
  const perContext = contexts > 1 ? ` per context, ${contexts} generation contexts` : "";
  log(`threads: ${threadsText(threads, maxThreads)}${perContext}${maxThreads > threads ? " (the higher count for large decodes)" : ""}`, {
    contexts,
    threads,
    threadsLargeSteps: maxThreads,
    budget: llama.maxThreads,
    requested: opts.threads,
    cpuMathCores: llama.cpuMathCores,
    gpu: llama.gpu,
  });
  return perStep;
}

/** The generation contexts' sequence pool, warmed up, and the KV cache choice over it (a second layout made on demand). */
async function sequencePool(llama: Llama, model: LlamaModel, opts: EngineOptions, plan: Plan, perStep: StepThreads | null, log: Log) {
  const { reproducible, contexts, kvMode } = plan;
  const auto = !(opts.sequences >= 1) && !reproducible;
  if (reproducible && opts.sequences > 1) log("REPRODUCIBLE: one sequence, whatever SEQUENCES says", { sequences: opts.sequences });
  const poolOptions: SequencePoolOptions = {
    sequences: reproducible ? 1 : auto ? await autoSequences(llama, model, opts.contextSize, contexts, plan.patched) : opts.sequences,
    auto,
    contexts,
    contextSize: opts.contextSize,
    threads: perStep?.contextThreads ?? plan.threads,
    onStep: perStep ? (tokens) => perStep.step(tokens) : undefined,
    onIdle: perStep ? () => perStep.idle() : undefined,
    flashAttention: flashAttentionOf(opts, plan, model),
    prefixReuse: !reproducible && (opts.prefixReuse ?? true),
    prefixCopy: opts.prefixCopy ?? true,
    log,
  };
  const warmUp = model.tokenize("Once upon a time", true).slice(0, 8);
  const makePool = async (kvUnified: boolean) => {
    const made = await SequencePool.create(model, { ...poolOptions, kvUnified });
    await made.warmUp(warmUp);
    return made;
  };
  const pool = await makePool(kvMode === true);
  return { pool, kv: new KvChoice(pool, kvMode === "auto" ? makePool : null, log), poolOptions, warmUp };
}

/** Embeddings and a reranker's pairs, on as many contexts each; a model that cannot do one says so and goes on without. */
async function sideContexts(llama: Llama, model: LlamaModel, opts: EngineOptions, plan: Plan, log: Log) {
  const sides = { contexts: chooseEmbeddingContexts({ cpuCount: llama.cpuMathCores, gpu: plan.onGpu, requested: opts.embeddingContexts }) };
  const options = { ...sides, contextSize: opts.contextSize, threads: plan.threads };
  let embedder: Embedder | null = null;
  try {
    embedder = await Embedder.create(model, options);
  } catch (err) {
    // Some models (encoder-decoder) cannot embed; generation still works and embed() says why.
    log("embeddings unavailable for this model", { error: err instanceof Error ? err.message : String(err) });
  }
  let ranker: Ranker | null = null;
  try {
    ranker = await Ranker.create(model, options);
  } catch (err) {
    log("ranking unavailable for this model", { error: err instanceof Error ? err.message : String(err) });
  }
  return { embedder, ranker };
}

async function assemble(llama: Llama, opts: EngineOptions, log: Log): Promise<Engine> {
  const plan = planOf(llama, opts);
  const { reproducible, build, threads, kvMode } = plan;
  // The budget all contexts share: concurrent embedding and generation split it instead of oversubscribing cores.
  llama.maxThreads = Math.max(threadBudget(threads, llama.cpuMathCores), plan.contexts * threads);
  const model = await loadModel(llama, opts.modelPath, log, opts.gpuLayers, opts.signal);
  opts.signal?.throwIfAborted();
  const perStep = stepThreadsOf(llama, model, opts, plan, log);
  if (model.trainContextSize > 0 && opts.contextSize > model.trainContextSize) {
    log("contextSize exceeds the model's training context; answers past it degrade", {
      contextSize: opts.contextSize,
      trainContextSize: model.trainContextSize,
    });
  }
  const { pool, kv, poolOptions, warmUp } = await sequencePool(llama, model, opts, plan, perStep, log);
  const { embedder, ranker } = await sideContexts(llama, model, opts, plan, log);
  const collect = fullCollection();
  if (!collect)
    log("node runs without --expose-gc: node-llama-cpp's sampler buffers are freed only when V8 collects on its own, so memory may grow", {
      samplerBytesPerRequest: samplerBytes(model),
    });
  const chatFormat = chooseChatFormat(model);
  return new LlamaEngine({
    llama,
    model,
    kv,
    embedder,
    ranker,
    chatFormat,
    samplerMemory: new SamplerMemory(samplerBytes(model), collect),
    lora: adapterPools(model, { ...poolOptions, threads, onStep: undefined, onIdle: undefined, kvUnified: kvMode === true }, warmUp, opts),
    grammars: new Grammars(llama),
    vocabularySize: vocabularySize(model),
    info: {
      modelPath: opts.modelPath,
      modelId: basename(opts.modelPath).replace(/\.gguf$/i, ""),
      generatedModel: opts.generatedModel,
      gpu: llama.gpu,
      gpuLayers: model.gpuLayers,
      threads,
      threadsLargeSteps: perStep?.maxThreads ?? threads,
      sequences: pool.size,
      contexts: pool.contexts.length,
      contextSize: pool.contextSize,
      embeddingDimensions: model.embeddingVectorSize,
      ranking: ranker !== null,
      hasChatTemplate: chatFormat.hasChatTemplate,
      chatWrapper: chatFormat.wrapper.wrapperName,
      reproducible,
      toolCalling: chatFormat.tools !== null,
      prefixCopy: pool.prefixCopy,
      build,
      kvUnified: kvMode,
      flashAttention: poolOptions.flashAttention,
    },
  });
}

/**
 * The adapters' pools: each as many sequences as the base's, on its own contexts of the same model (its own threads,
 * not the base's per-step count, which follows one pool's steps). Each is counted as its KV cache and its file.
 */
function adapterPools(model: LlamaModel, poolOptions: SequencePoolOptions, warmUp: Token[], opts: EngineOptions): LoraPools {
  const log = opts.log ?? (() => {});
  return new LoraPools({
    async make(adapter) {
      const made = await SequencePool.create(model, { ...poolOptions, lora: adapter });
      await made.warmUp(warmUp);
      return made;
    },
    async bytesOf(adapter) {
      const { contextSize, sequences, contexts = 1 } = poolOptions;
      const [whole, weights, own] = await Promise.all([
        estimateFootprint({ path: opts.modelPath, contextSize, sequences, contexts }),
        stat(opts.modelPath).then((s) => s.size),
        stat(adapter.path).then((s) => s.size),
      ]);
      return whole - weights + own;
    },
    budgetBytes: opts.adapterMemoryBytes ?? Number.POSITIVE_INFINITY,
    log,
  });
}
