// The generation contexts a sequence pool lends from: N sequences spread evenly over the contexts, each context
// with its batch order; when the count is automatic and memory is short, fewer sequences are tried, halving.
import { InsufficientMemoryError, type LlamaContext, type LlamaContextSequence, type LlamaModel } from "node-llama-cpp";
import type { EngineOptions, LoraAdapter } from "../types.js";
import { BatchOrder } from "./batch-order.js";

export interface GenerationContextOptions {
  /** Sequences wanted in all; when `auto`, fewer are taken if memory is short. */
  sequences: number;
  /** Generation contexts the sequences are spread over (default 1). */
  contexts?: number;
  auto: boolean;
  contextSize: number;
  /** A fixed count, or a range node-llama-cpp's thread splitter allots per decode (step-threads.ts). */
  threads: number | { ideal: number; min: number };
  /** Told each step's token count before it is decoded. */
  onStep?: (tokens: number) => void;
  /** See createEngine: "auto", as llama-server. */
  flashAttention: boolean | "auto";
  /** One KV stream for all sequences of a context (the patched build only; native.ts). */
  kvUnified?: boolean;
  /** A LoRA adapter every context applies (node-llama-cpp sets adapters per context). */
  lora?: LoraAdapter;
  log: NonNullable<EngineOptions["log"]>;
}

export interface GenerationContexts {
  contexts: LlamaContext[];
  /** Each context's batch order, by the contexts' index. */
  orders: BatchOrder[];
  sequences: LlamaContextSequence[];
}

export async function createGenerationContexts(model: LlamaModel, opts: GenerationContextOptions): Promise<GenerationContexts> {
  let sequences = Math.max(1, Math.floor(opts.sequences));
  for (;;) {
    const count = Math.max(1, Math.min(sequences, Math.floor(opts.contexts ?? 1)));
    const contexts: LlamaContext[] = [];
    const orders: BatchOrder[] = [];
    try {
      for (let c = 0; c < count; c++) {
        // The sequences spread evenly: the first contexts take one more when they do not divide.
        const share = Math.floor(sequences / count) + (c < sequences % count ? 1 : 0);
        const order = new BatchOrder(opts.onStep, share, opts.kvUnified ?? false);
        contexts.push(
          await model.createContext({
            sequences: share,
            contextSize: opts.contextSize,
            threads: opts.threads,
            flashAttention: opts.flashAttention,
            failedCreationRemedy: false,
            batching: { itemPrioritizationStrategy: order.strategy },
            // Read by the patched build only (native.ts); the prebuilt addon ignores it.
            ...(opts.kvUnified ? { experimentalKvUnified: true } : {}),
            ...(opts.lora ? { lora: { adapters: [{ filePath: opts.lora.path, scale: opts.lora.scale }] } } : {}),
          }),
        );
        orders.push(order);
      }
      const all = contexts.flatMap((context) => Array.from({ length: context.totalSequences }, () => context.getSequence()));
      return { contexts, orders, sequences: all };
    } catch (err) {
      await Promise.allSettled(contexts.map((c) => c.dispose()));
      // Each sequence holds its own contextSize of KV cache; halve until it fits, unless the count was asked for.
      if (!opts.auto || sequences === 1 || !(err instanceof InsufficientMemoryError)) throw err;
      const fewer = Math.max(1, Math.floor(sequences / 2));
      opts.log("not enough memory for the sequences; trying fewer", { sequences, next: fewer, contextSize: opts.contextSize });
      sequences = fewer;
    }
  }
}
