// The one interface the rest of the service sees of the inference engine.
// Nothing outside engine/ imports node-llama-cpp; everything goes through this.

export interface SamplingParams {
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  stop?: string[];
  seed?: number;
}

export type ChatRole = "system" | "developer" | "user" | "assistant" | "tool";

export interface ChatMessage {
  role: ChatRole;
  content: string;
}

export type FinishReason = "stop" | "length";

export interface GenerationResult {
  text: string;
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens served from a reused KV-cache prefix. */
  cachedPromptTokens: number;
  finishReason: FinishReason;
}

export interface EmbeddingResult {
  embeddings: number[][];
  promptTokens: number;
}

export interface EngineInfo {
  modelPath: string;
  /** The name served as `model` in responses (file name without .gguf). */
  modelId: string;
  /** True when serving the project's own random-weights model. */
  generatedModel: boolean;
  gpu: string | false;
  gpuLayers: number;
  /** Threads a decode computes with; on CPU a large decode takes `threadsLargeSteps` (engine/threads.ts). */
  threads: number;
  threadsLargeSteps: number;
  sequences: number;
  contextSize: number;
  embeddingDimensions: number;
  hasChatTemplate: boolean;
  chatWrapper: string;
}

export interface Engine {
  readonly info: EngineInfo;
  complete(prompt: string, params: SamplingParams, signal?: AbortSignal): Promise<GenerationResult>;
  chat(messages: ChatMessage[], params: SamplingParams, signal?: AbortSignal): Promise<GenerationResult>;
  embed(inputs: string[], signal?: AbortSignal): Promise<EmbeddingResult>;
  countTokens(text: string): number;
  close(): Promise<void>;
}

/**
 * A request the engine refused. `retryable` says whether trying again later can help
 * (a transient resource failure) or not (context overflow, bad input).
 */
export class EngineRequestError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = "EngineRequestError";
  }
}

export interface EngineOptions {
  /** Absolute path of a .gguf file. */
  modelPath: string;
  generatedModel: boolean;
  /** "auto" tries CUDA, then Vulkan, then CPU. */
  gpu: "auto" | "cuda" | "vulkan" | false;
  /** 0 = choose from the machine (see engine/threads.ts). */
  threads: number;
  /** Parallel sequences in the one context; 0 = choose from the model and machine. */
  sequences: number;
  /** Tokens per sequence. */
  contextSize: number;
  /** Parallel embedding contexts (node-llama-cpp serialises work inside one). */
  embeddingContexts: number;
  /** Reuse cached prompt prefixes across requests (default true); false only to measure the gain. */
  prefixReuse?: boolean;
  /** Called with one-line human notes (GPU chosen, threads, warnings). */
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}
