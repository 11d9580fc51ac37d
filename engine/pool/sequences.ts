// How many parallel sequences the context gets when none are configured.
//
// With the batch order of batch-order.ts, more sequences per decode pay off as soon as the model is more
// than a toy: on 2 CPU cores the 8-layer, 512-wide generated model went from 326 tokens/s at 8 sequences
// to 563 at 32 and 546 at 64 (docs/performance.md), while stories260K stayed flat (5,000-5,500) from 8 to 64.
// Each sequence holds its own KV cache of the full context size, so the count is halved while the
// context would take more than a share of the machine's memory.

import type { Llama, LlamaModel } from "node-llama-cpp";
import { usableRam } from "../load/device-memory.js";

/**
 * Sequences used when none are configured, before the memory cap: on CPU per generation context (the patched
 * build's fewer contexts take twice as many each: fuller decodes, and families that share more), on GPU in all.
 */
export const DEFAULT_SEQUENCES = { cpuPerContext: 16, cpuPerContextPatched: 32, gpu: 32 } as const;

/** The context (KV caches and compute buffers) of automatically sized sequences takes at most this share of RAM or VRAM. */
export const CONTEXT_MEMORY_SHARE = 0.25;

/** The most sequences, from `wanted` halving down to 1, whose context takes at most `budgetBytes`. */
export async function fitSequences(wanted: number, budgetBytes: number, bytesFor: (sequences: number) => Promise<number>): Promise<number> {
  let sequences = Math.max(1, Math.floor(wanted));
  while (sequences > 1 && (await bytesFor(sequences)) > budgetBytes) sequences = Math.floor(sequences / 2);
  return sequences;
}

/** The default count for this model and machine: DEFAULT_SEQUENCES, capped by CONTEXT_MEMORY_SHARE. */
export async function autoSequences(llama: Llama, model: LlamaModel, contextSize: number, contexts = 1, patched = false): Promise<number> {
  const onGpu = model.gpuLayers > 0;
  const memory = onGpu ? (await llama.getVramState()).total : usableRam();
  return fitSequences(
    onGpu ? DEFAULT_SEQUENCES.gpu : (patched ? DEFAULT_SEQUENCES.cpuPerContextPatched : DEFAULT_SEQUENCES.cpuPerContext) * contexts,
    memory * CONTEXT_MEMORY_SHARE,
    async (sequences) => {
      const need = await model.fileInsights.estimateContextResourceRequirementsV2({
        contextSize,
        sequences,
        modelGpuLayers: model.gpuLayers,
      });
      return onGpu ? need.gpuVram : need.cpuRam;
    },
  );
}
