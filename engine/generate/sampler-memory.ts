// Native memory that only V8's garbage collector gives back.
//
// node-llama-cpp 3.22.1 creates a native sampler for every evaluation (every request) with a candidate
// buffer of 12 bytes per vocabulary token (1.8 MB for Qwen2.5's 151,936 tokens). dispose() frees the
// sampler chain but not that buffer: it goes with the JS wrapper, when V8 collects it. A request leaves
// little JS garbage, so V8 sees no reason to collect: measured, 1,500 1-token requests on a 32,000-token
// model grew the process by 475 MB, and 50,000 on stories260K (512 tokens) by ~200 MB. So the engine
// counts what may be waiting and asks for a full collection (a few ms) once it passes a threshold, or once no
// evaluation has finished for a second (a worker whose batch ended gives the memory back).
//
// The cause, in node-llama-cpp's addon (llama/addon/AddonSampler.cpp): `tokenCandidates`, a vector sized to the
// vocabulary, is a member that `dispose()` leaves allocated; only the destructor frees it, when V8 finalizes the
// wrapper, and the addon never reports that memory to V8 (Napi::MemoryManagement::AdjustExternalMemory), so
// nothing tells V8 a collection is due. The upstream fix is to release the vector in dispose(). Until then the
// collection is asked for through `global.gc`, which Node exposes when started with --expose-gc: every way this
// project starts Node passes it (npm start, npm run batch, the images, the tests). Without it the engine says so
// at start and runs on; it never flips V8 flags at runtime.
import type { LlamaModel } from "node-llama-cpp";

/** Bytes of sampler buffers allowed to wait for the collector. */
export const SAMPLER_GARBAGE_LIMIT = 64 * 2 ** 20;
/** How long no evaluation finishes before what waits is collected: a finished batch gives its memory back. */
export const SAMPLER_IDLE_MS = 1000;
/** sizeof(llama_token_data): id, logit, probability. */
const BYTES_PER_CANDIDATE = 12;

export class SamplerMemory {
  private waiting = 0;
  private idle: NodeJS.Timeout | null = null;
  collections = 0;

  constructor(
    private readonly bytesPerRequest: number,
    private readonly collect: (() => void) | null,
    private readonly limit = SAMPLER_GARBAGE_LIMIT,
    private readonly idleMs = SAMPLER_IDLE_MS,
  ) {}

  /** One evaluation finished: its sampler's buffer now waits for the collector. */
  released(): void {
    if (!this.collect) return;
    this.waiting += this.bytesPerRequest;
    if (this.waiting >= this.limit) {
      this.collectNow();
      return;
    }
    // Without this, a process that ends its work below the limit keeps up to the limit in dead buffers while idle.
    // One timer, pushed back on every release: a full collection per request would stall a busy process.
    this.idle ??= setTimeout(() => this.collectNow(), this.idleMs).unref();
    this.idle.refresh();
  }

  /** Stops the idle collection (the engine closes). */
  close(): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
  }

  private collectNow(): void {
    this.close();
    this.waiting = 0;
    this.collections++;
    this.collect!();
  }
}

export function samplerBytes(model: LlamaModel): number {
  return vocabularySize(model) * BYTES_PER_CANDIDATE;
}

/** Tokens in the model's vocabulary, from the GGUF's token list (or its embedding matrix's width). */
export function vocabularySize(model: LlamaModel): number {
  const tokens = (model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: unknown } } }).tokenizer?.ggml?.tokens;
  const embedding = model.fileInfo.tensorInfo?.find((t) => t.name === "token_embd.weight");
  return Array.isArray(tokens) ? tokens.length : Number(embedding?.dimensions[1] ?? 0);
}

/** V8's full collection when Node runs with --expose-gc, else null. */
export function fullCollection(): (() => void) | null {
  const exposed = (globalThis as { gc?: () => void }).gc;
  return typeof exposed === "function" ? () => exposed() : null;
}
