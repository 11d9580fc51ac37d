// The one interface the rest of the service sees of the inference engine.
// Nothing outside engine/ imports node-llama-cpp; everything goes through this.
import type { Lane } from "../openai/backend.js";

export interface SamplingParams {
  maxTokens?: number;
  /**
   * The request field that set maxTokens (`max_tokens`, `max_completion_tokens`): a prompt plus maxTokens beyond the
   * context is then refused naming it, as OpenAI refuses it. Without it, maxTokens is capped to what fits.
   */
  maxTokensParam?: string;
  temperature?: number;
  /** 0 samples greedily, as temperature 0 does. */
  topP?: number;
  /** Anthropic's top_k: sample among this many most likely tokens (0 or absent: no cut). */
  topK?: number;
  stop?: string[];
  seed?: number;
  /** OpenAI's penalties (-2..2), on the tokens generated so far. */
  frequencyPenalty?: number;
  presencePenalty?: number;
  /** Token id -> a value added to its logit (-100 bans it, 100 all but forces it). */
  logitBias?: ReadonlyMap<number, number>;
  /** The answer must be a JSON object, or follow a JSON schema (engine/generate/json-schema.ts checks it first). */
  format?:
    | { type: "json_object" }
    | { type: "json_schema"; schema: Record<string, unknown> }
    /** Exactly one of these strings (a function's name in a tool call). */
    | { type: "one_of"; values: string[] };
  /** Return each generated token's log probability with this many most likely alternatives (0..20). */
  logprobs?: number;
  /**
   * Return each prompt token's log probability given the tokens before it, with this many most likely alternatives
   * there (a completion's echo with logprobs). The prompt is then evaluated whole: no cached prefix has its logits.
   */
  promptLogprobs?: number;
  /** Answers generated from one evaluation of the prompt (1 by default). */
  n?: number;
  /** Functions the model may call (chat only; engine/generate/tool-calls.ts). */
  tools?: ToolsParams;
  /**
   * Told each choice's answer as it is generated: text that no stop string can take back any more (a stop string's
   * possible beginning is held until it is known). All the pieces of a choice make its final text.
   */
  onText?: (choice: number, text: string) => void;
  /** Told the prompt's tokens and how many a cache held, once its sequence is ready and before any text. */
  onPrompt?: (usage: { promptTokens: number; cachedTokens: number }) => void;
}

export interface ToolFunction {
  name: string;
  description?: string;
  /** A JSON schema of the arguments object; absent: the function takes none. */
  parameters?: Record<string, unknown>;
}

export interface ToolsParams {
  functions: ToolFunction[];
  /** none: answer in text; auto: the model decides; required: at least one call; a name: that function. */
  choice: "none" | "auto" | "required" | { name: string };
  /** More than one call in one answer. */
  parallel: boolean;
}

export interface ToolCall {
  name: string;
  /** The arguments as JSON text, as OpenAI returns them. */
  arguments: string;
}

export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

export interface GeneratedTokenLogprob extends TokenLogprob {
  /** The most likely tokens at this position, most likely first. */
  top: TokenLogprob[];
  /** Characters of the answer before this token (a token within a character: where that character begins). */
  offset: number;
}

/** A prompt token's log probability given those before it: the first token has none, nor alternatives. */
export interface PromptTokenLogprob {
  token: string;
  logprob: number | null;
  bytes: number[];
  top: TokenLogprob[] | null;
  /**
   * Characters of the prompt's text before this token (a token within a character: where that character begins; a
   * beginning-of-sequence token the tokenizer added: 0).
   */
  offset: number;
}

export interface Choice {
  text: string;
  completionTokens: number;
  finishReason: FinishReason;
  /** Set when SamplingParams.logprobs was. */
  logprobs?: GeneratedTokenLogprob[];
  /** The stop string that ended the answer, when one did. */
  stoppedBy?: string;
  /** Calls the model made (finishReason "tool_calls", or "length" when the budget ran out inside one). */
  toolCalls?: ToolCall[];
}

export type ChatRole = "system" | "developer" | "user" | "assistant" | "tool";

export interface ChatMessage {
  role: ChatRole;
  content: string;
  /** An assistant turn's calls, each answered by a later tool message with the same id. */
  toolCalls?: Array<ToolCall & { id: string }>;
  /** A tool message: the call it answers. */
  toolCallId?: string;
}

export type FinishReason = "stop" | "length" | "tool_calls";

/** The first choice's fields at the top (the usual n = 1), every choice in `choices`. */
export interface GenerationResult extends Choice {
  promptTokens: number;
  /** Over every choice. */
  completionTokens: number;
  /** Prompt tokens served from a reused KV-cache prefix. */
  cachedPromptTokens: number;
  choices: Choice[];
  /** Set when SamplingParams.promptLogprobs was: one per prompt token. */
  promptLogprobs?: PromptTokenLogprob[];
}

export interface EmbeddingResult {
  embeddings: number[][];
  promptTokens: number;
}

export interface RankResult {
  /** Each pair's relevance, 0 to 1, in the pairs' order. */
  scores: number[];
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
  /** Threads a decode computes with; on CPU a large decode takes `threadsLargeSteps` (engine/load/threads.ts). */
  threads: number;
  threadsLargeSteps: number;
  sequences: number;
  /** Generation contexts the sequences are spread over, each decoding on its own threads. */
  contexts: number;
  contextSize: number;
  embeddingDimensions: number;
  /** The model has a classification head: it ranks (/v1/rerank, /v1/score). */
  ranking: boolean;
  hasChatTemplate: boolean;
  chatWrapper: string;
  reproducible: boolean;
  /** The chat template has its own function-calling format (tools work). */
  toolCalling: boolean;
  /** Prompt prefixes are copied between the sequences of a context (engine/pool/prefix-share.ts). */
  prefixCopy: boolean;
  /** The node-llama-cpp build that runs: its prebuilt binaries, or the patched build (engine/load/native.ts). */
  build: "prebuilt" | "patched";
  /** One KV cache for all sequences of a context (the patched build only); "auto": chosen per batch run. */
  kvUnified: boolean | "auto";
  /** What llama.cpp's contexts were asked for flash attention: on, off, or "auto" (llama.cpp decides). */
  flashAttention: boolean | "auto";
}

/** What the generation contexts have done since the engine started (counters). */
export interface SchedulingStats {
  /** Decodes, the sequences in them, and the tokens they evaluated (prompts and generated tokens alike). */
  steps: number;
  sequences: number;
  evaluatedTokens: number;
  /**
   * The passes over the weights llama.cpp cut those decodes into (engine/pool/micro-batches.ts): with a KV stream per
   * sequence, each prompt tail on a sequence apart from the others is one more.
   */
  microBatches: number;
  /** Prefixes copied from another sequence of the same context, and the prompt tokens those copies spared. */
  prefixCopies: number;
  copiedTokens: number;
  /**
   * Times a batch line gave its sequence to an interactive request at its next token, and the tokens such lines
   * evaluated again once resumed (their prompt and answer so far, less what a cache still held).
   */
  preemptions: number;
  reevaluatedTokens: number;
  /** Times the contexts were made again with the other KV cache (KV_UNIFIED auto), and the cache they keep now. */
  kvSwitches: number;
  kvUnified: boolean;
}

/**
 * Who asks the engine's pools (sequences, embedding and ranking contexts) for an item, passed with the request down
 * to each pool it waits on: its lane, whether it keeps the lane's reserve, and who is told once a pool lends it one.
 */
export interface Borrower {
  lane: Lane;
  /**
   * The interactive lane: the pools keep an item free for the lane's next request while it is warm (engine/pool/pool.ts),
   * true when absent; false while a batch of the model is at risk of its deadline (ExecuteOptions.keepReserve).
   */
  keepReserve?: boolean;
  /** Told as a pool lends the request an item: it has begun on the engine (ExecuteOptions.onBegin); may be told again. */
  onBegin?: () => void;
  /**
   * Whose cached prompts its prompt may reuse (ExecuteOptions.cacheScope): a sequence's KV cache serves only the scope
   * whose prompt it holds, so no key sees another's prompts in its cached token counts or its timing. Absent: one
   * scope of its own.
   */
  cacheScope?: string;
}

/** Batch work that nobody is told the beginning of: what a call that names no borrower is. */
export const BATCH_WORK: Borrower = Object.freeze({ lane: "batch" });

export interface Engine {
  readonly info: EngineInfo;
  /** A text prompt, or token ids as they are (no beginning-of-sequence token added). `borrower`: BATCH_WORK when absent. */
  complete(
    prompt: string | readonly number[],
    params: SamplingParams,
    signal?: AbortSignal,
    borrower?: Borrower,
  ): Promise<GenerationResult>;
  chat(messages: ChatMessage[], params: SamplingParams, signal?: AbortSignal, borrower?: Borrower): Promise<GenerationResult>;
  embed(inputs: string[], signal?: AbortSignal, borrower?: Borrower): Promise<EmbeddingResult>;
  /** Each (query, document) pair's relevance, 0 to 1; `param` names the line's field a pair comes from. */
  rank(pairs: ReadonlyArray<readonly [string, string]>, param: string, signal?: AbortSignal, borrower?: Borrower): Promise<RankResult>;
  countTokens(text: string): number;
  /** Tokens of a chat's prompt as chat() renders it (template, tools shown), without running it. */
  chatPromptTokens(messages: ChatMessage[], functions?: readonly ToolFunction[]): number;
  /** Token ids as text, special tokens written as their text (a token-id prompt echoed). */
  detokenize(tokens: readonly number[]): string;
  /** Vocabulary size and whether a token ends generation (for logit_bias and token-id prompts). */
  readonly vocabularySize: number;
  isEndOfGeneration(token: number): boolean;
  scheduling(): SchedulingStats;
  /** Told what a batch run holds before its first line; resolves once the engine is set up for it. */
  prepareRun(shape: RunShape): Promise<void>;
  /**
   * The same engine answering with a LoRA adapter applied (contexts of its own over the same weights); closing the
   * view leaves the engine open. Absent on a view itself.
   */
  withAdapter?(adapter: LoraAdapter): Engine;
  close(): Promise<void>;
}

// The engine's refusals and failures are the backends' RequestError (retryable or not).
export { RequestError } from "../openai/errors.js";

import type { RunShape } from "../openai/backend.js";

/** A LoRA adapter served over its base model's weights (engine/pool/lora-pools.ts). */
export interface LoraAdapter {
  /** The name it is served under. */
  name: string;
  /** Its GGUF (llama.cpp's LoRA format). */
  path: string;
  /** How strongly it applies (llama.cpp's scale; 1 as trained). */
  scale: number;
}

export interface EngineOptions {
  /** Absolute path of a .gguf file. */
  modelPath: string;
  generatedModel: boolean;
  /** "auto" tries CUDA, then Vulkan, then CPU. */
  gpu: "auto" | "cuda" | "vulkan" | false;
  /** Layers offloaded to the GPU: "auto" (default) as many as fit. Ignored on CPU, where there is no GPU to offload to. */
  gpuLayers?: number | "auto";
  /** 0 = choose from the machine (see engine/load/threads.ts). */
  threads: number;
  /** Parallel sequences in all generation contexts; 0 = choose from the model and machine. */
  sequences: number;
  /** Generation contexts decoding at the same time; 0 (or absent) = choose from the machine (engine/load/threads.ts). */
  contexts?: number;
  /** Tokens per sequence. */
  contextSize: number;
  /** Parallel embedding contexts (node-llama-cpp serialises work inside one); 0 = as many as generation contexts on CPU, 2 on GPU. */
  embeddingContexts: number;
  /** Reuse cached prompt prefixes across requests (default true); false only to measure the gain. */
  prefixReuse?: boolean;
  /** Copy a prefix another sequence of the same context holds instead of evaluating it (default true; engine/pool/prefix-share.ts). */
  prefixCopy?: boolean;
  /** Which node-llama-cpp build to load (engine/load/native.ts); default ENGINE_BUILD, else "auto". */
  build?: "auto" | "prebuilt" | "patched";
  /**
   * One KV cache for all sequences of a context, where the patched build runs (default false); "auto": chosen per
   * batch run by whether its lines share openings (kv-choice.ts).
   */
  kvUnified?: boolean | "auto";
  /**
   * llama.cpp's flash attention: true or false as asked; "auto" (default) lets llama.cpp decide on GPU and on CPU
   * for heads 32 wide or more, and leaves it off for narrower heads (engine/index.ts).
   */
  flashAttention?: boolean | "auto";
  /**
   * Every request computed alone and from scratch (one sequence, no prefix cache), so a seeded request gives
   * the same answer whatever else runs: llama.cpp's arithmetic differs slightly between a token decoded alone
   * and one decoded beside others, or after a cached prefix. Costs most of the throughput (README).
   */
  reproducible?: boolean;
  /** Called with one-line human notes (GPU chosen, threads, warnings). */
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** Pass llama.cpp's debug messages to `log` too (diagnostics and tests; warnings and errors only by default). */
  llamaDebugLog?: boolean;
  /** Stops the load (a Ctrl-C, a shutdown): createEngine then rejects with the signal's reason and keeps nothing. */
  signal?: AbortSignal;
  /** What the LoRA adapters' contexts may take together (lora-pools.ts); default unbounded. One adapter's always fit. */
  adapterMemoryBytes?: number;
}
