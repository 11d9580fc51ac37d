// Shapes of the generated models. "tiny" is what the service serves when no model is configured; the larger ones
// copy real models' dimensions for realistic benchmarks; "reranker" is a ranking model (a classification head).
import type { GgmlTypeName } from "./format.js";

export interface ModelPreset {
  name: string;
  description: string;
  blockCount: number;
  embeddingLength: number;
  headCount: number;
  headCountKv: number;
  feedForwardLength: number;
  vocabSize: number;
  contextLength: number;
  ropeFreqBase: number;
  rmsNormEps: number;
  /** Type of the large matrices; norms are always F32. */
  weightType: GgmlTypeName;
  /** No output.weight: the output projection reuses token_embd (as Qwen2.5-0.5B does). */
  tiedEmbeddings: boolean;
  /**
   * A reranker: the Qwen3 architecture (llama's, with per-head query and key norms) with a classification head,
   * `cls.output.weight`, scoring these labels (the first is relevance), pooled for ranking, as Qwen3-Reranker's
   * GGUF is. llama.cpp and node-llama-cpp then rank with it (`/v1/rerank`, `/v1/score`).
   */
  classifierLabels?: readonly string[];
}

const TINY = {
  name: "tiny",
  description: "2 layers, 64 wide: loads in milliseconds, for tests and a model-less first start",
  blockCount: 2,
  embeddingLength: 64,
  headCount: 4,
  headCountKv: 2,
  feedForwardLength: 128,
  vocabSize: 2048,
  contextLength: 8192,
  ropeFreqBase: 10000,
  rmsNormEps: 1e-5,
  weightType: "F32",
  tiedEmbeddings: false,
} as const satisfies ModelPreset;

export const MODEL_PRESETS = {
  tiny: TINY,
  small: {
    name: "small",
    description: "8 layers, 512 wide, 32k vocabulary, Q8_0: a mid-size benchmark",
    blockCount: 8,
    embeddingLength: 512,
    headCount: 8,
    headCountKv: 4,
    feedForwardLength: 2048,
    vocabSize: 32000,
    contextLength: 8192,
    ropeFreqBase: 10000,
    rmsNormEps: 1e-5,
    weightType: "Q8_0",
    tiedEmbeddings: false,
  },
  "qwen2.5-0.5b": {
    name: "qwen2.5-0.5b",
    description: "Qwen2.5-0.5B's dimensions (24 layers, 896 wide, 14/2 heads, 151,936 vocabulary), Q8_0",
    blockCount: 24,
    embeddingLength: 896,
    headCount: 14,
    headCountKv: 2,
    feedForwardLength: 4864,
    vocabSize: 151936,
    contextLength: 32768,
    ropeFreqBase: 1_000_000,
    rmsNormEps: 1e-6,
    weightType: "Q8_0",
    tiedEmbeddings: true,
  },
  reranker: {
    ...TINY,
    name: "reranker",
    description: "a ranking model: Qwen3 architecture with a yes/no classification head, 2 layers, 64 wide, for /v1/rerank and /v1/score",
    ropeFreqBase: 1_000_000,
    rmsNormEps: 1e-6,
    tiedEmbeddings: true,
    classifierLabels: ["yes", "no"],
  },
} as const satisfies Record<string, ModelPreset>;

export type PresetName = keyof typeof MODEL_PRESETS;
export const PRESET_NAMES = Object.keys(MODEL_PRESETS) as PresetName[];
export const DEFAULT_PRESET: PresetName = "tiny";

export function isPresetName(name: string): name is PresetName {
  return Object.hasOwn(MODEL_PRESETS, name);
}

export function getPreset(name: string): ModelPreset {
  if (!isPresetName(name)) {
    throw new Error(`unknown model preset "${name}"; choose one of: ${PRESET_NAMES.join(", ")}`);
  }
  return MODEL_PRESETS[name];
}
