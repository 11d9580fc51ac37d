// Describes a LoRA adapter GGUF with random weights for a generated model, laid out as llama.cpp's
// convert_lora_to_gguf.py writes one and its adapter loader reads it: `general.type = adapter`, `adapter.type = lora`,
// `adapter.lora.alpha`, and per adapted matrix `<name>.lora_a` (ne [inputs, rank]) and `<name>.lora_b` (ne [rank, outputs]).
import type { GgufFileInfo } from "node-llama-cpp";
import { randomTensorData, tensorSeed } from "./random.js";
import { type GgufFile, type GgufTensor, gguf } from "./writer.js";

/** The rank of a generated adapter: small, as real task adapters are (8 to 64). */
export const GENERATED_LORA_RANK = 8;

/** Matrices the generated adapter changes: attention's query, value and output, and the feed-forward's up and down. */
const ADAPTED = /^blk\.\d+\.(attn_q|attn_v|attn_output|ffn_up|ffn_down)\.weight$/;

/**
 * An adapter for the base model whose header is `base`: for each adapted matrix of ne [inputs, outputs], A of
 * [inputs, rank] and B of [rank, outputs], both random, so the product B·A is of the weights' own size (alpha = rank,
 * so llama.cpp's scale alpha / rank is 1).
 */
export function buildLoraAdapter(
  base: Pick<GgufFileInfo, "metadata" | "fullTensorInfo">,
  seed: number,
  rank = GENERATED_LORA_RANK,
): GgufFile {
  const arch = String((base.metadata as { general?: { architecture?: string } }).general?.architecture ?? "");
  if (!arch) throw new Error("the base model's header names no general.architecture");
  const adapted = (base.fullTensorInfo ?? []).filter((t) => ADAPTED.test(t.name));
  if (adapted.length === 0) throw new Error(`the base model has no matrices an adapter would change (${ADAPTED.source})`);
  const tensors: GgufTensor[] = adapted.flatMap((t) => {
    const [inputs, outputs] = t.dimensions.map(Number) as [number, number];
    const a = `${t.name}.lora_a`;
    const b = `${t.name}.lora_b`;
    return [
      {
        name: a,
        type: "F32",
        dims: [inputs, rank],
        data: () => randomTensorData("F32", inputs, rank, 1 / Math.sqrt(inputs), tensorSeed(seed, a)),
      },
      {
        name: b,
        type: "F32",
        dims: [rank, outputs],
        data: () => randomTensorData("F32", rank, outputs, 1 / Math.sqrt(rank), tensorSeed(seed, b)),
      },
    ];
  });
  return {
    metadata: {
      "general.architecture": gguf.string(arch),
      "general.type": gguf.string("adapter"),
      "general.name": gguf.string(`random-lora-seed${seed}`),
      "adapter.type": gguf.string("lora"),
      "adapter.lora.alpha": gguf.float32(rank),
    },
    tensors,
  };
}
