// How many threads llama.cpp computes with.
//
// ggml's worker threads meet at a barrier after every graph node; when one of them is preempted by
// Node's own event-loop or libuv threads (which sample tokens and schedule decodes), every node waits
// a scheduler time slice. So one core is left to Node and the rest compute. With the model on a GPU
// the CPU threads only feed it, and a few are enough.
//
// That holds for short decodes. A long one (a big model, many sequences) leaves Node idle while it runs, and then
// all cores are faster. So on CPU the thread count is chosen per decode (step-threads.ts) from the work in it:
// parameters times tokens, all cores from ALL_CORES_STEP_WORK. The measurements behind both rules are in
// docs/performance.md ("The engine's defaults").

export interface ThreadsInput {
  /** Physical cores useful for math (node-llama-cpp's `llama.cpuMathCores`). */
  cpuCount: number;
  /** True when the model runs on a GPU. */
  gpu: boolean;
  /** The configured value; 0 (or less) means "choose". */
  requested: number;
  /** The patched build runs (engine/load/native.ts): see chooseContexts. */
  patched?: boolean;
}

/** Most CPU threads worth using to feed a GPU. */
export const GPU_FEEDER_THREADS = 4;

export function chooseThreads({ cpuCount, gpu, requested }: ThreadsInput): number {
  if (Number.isFinite(requested) && requested >= 1) return Math.floor(requested);
  const cores = Number.isFinite(cpuCount) ? Math.max(1, Math.floor(cpuCount)) : 1;
  // One core stays free for Node's event loop and libuv pool; see above.
  const spare = Math.max(1, cores - 1);
  return gpu ? Math.min(GPU_FEEDER_THREADS, spare) : spare;
}

/**
 * Generation contexts on CPU: two per core, at most MAX_CPU_CONTEXTS, each decoding on one thread. A
 * single-threaded decode has no barrier for Node's threads to stall, and while one context waits for its
 * tokens to be sampled the others keep the cores busy; past 4 nothing is gained, since decodes run on libuv's pool
 * of 4 threads (docs/performance.md, "The engine's defaults"). On GPU one context feeds the device.
 */
export const MAX_CPU_CONTEXTS = 4;

export function chooseContexts({ cpuCount, gpu, requested, patched }: ThreadsInput): number {
  if (Number.isFinite(requested) && requested >= 1) return Math.floor(requested);
  if (gpu) return 1;
  const cores = Number.isFinite(cpuCount) ? Math.max(1, Math.floor(cpuCount)) : 1;
  // On the patched build a copy never waits for a context's lock, so fewer, fuller contexts pay: one per core
  // (one context on every core lost: its OpenMP threads and its sampling take turns).
  return Math.min(MAX_CPU_CONTEXTS, patched ? cores : 2 * cores);
}

/** Threads each of several CPU contexts computes with, unless a count was asked for: the cores shared out, at least 1. */
export function threadsPerContext(cpuCount: number, contexts: number): number {
  const cores = Number.isFinite(cpuCount) ? Math.floor(cpuCount) : 1;
  return Math.max(1, Math.floor(cores / Math.max(1, contexts)));
}

/**
 * Embedding contexts: the configured count, else as many as generation contexts on CPU (each embeds one input at
 * a time, so more contexts embed more at once), and 2 on GPU.
 */
export function chooseEmbeddingContexts(input: ThreadsInput): number {
  if (Number.isFinite(input.requested) && input.requested >= 1) return Math.floor(input.requested);
  return input.gpu ? 2 : chooseContexts({ ...input, requested: 0 });
}

/** Parameter-tokens in one decode from which it computes on all cores (see above). */
export const ALL_CORES_STEP_WORK = 5e8;

/** Threads for one decode of `tokens` tokens through a model with `parameters` parameters used per token. */
export function stepThreads(cores: number, spare: number, parameters: number, tokens: number): number {
  return parameters * tokens >= ALL_CORES_STEP_WORK ? Math.max(cores, spare) : spare;
}

/**
 * Threads all contexts may compute with at once (llama.cpp's thread budget, shared by generation and the
 * embedding contexts). Normally the per-context count: a second context computing beside the first would
 * oversubscribe the cores its threads meet on. A single-threaded context has no such barrier, so on a
 * machine with a core to spare two of them may compute at once: two embedding contexts then embed 1.8x as
 * fast as one on 2 cores, where with a budget of 1 they took turns.
 */
export function threadBudget(threads: number, cpuCount: number): number {
  const cores = Number.isFinite(cpuCount) ? Math.floor(cpuCount) : 1;
  return threads === 1 && cores >= 2 ? 2 : threads;
}

/** "1 thread", or "1-2 threads" when large decodes take more cores (step-threads.ts). */
export function threadsText(threads: number, threadsLargeSteps = threads): string {
  return threadsLargeSteps > threads ? `${threads}-${threadsLargeSteps} threads` : `${threads} thread${threads === 1 ? "" : "s"}`;
}
