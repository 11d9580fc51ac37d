// The local engine as an InferenceBackend: OpenAI request bodies in, OpenAI response bodies out. Everything
// llama-specific stays below this file. What the engine cannot honour is refused first, per line and naming the
// field (openai-checks.ts); this file runs what passed and builds the response bodies.
import type {
  BackendInfo,
  BackendResult,
  ExecuteOptions,
  InferenceBackend,
  InferenceRequest,
  RunShape,
  TokenUsage,
} from "../../openai/backend.js";
import type { ChatBody, ChatMessageBody, CompletionBody, EmbeddingBody } from "../../openai/bodies.js";
import { PROMPT_FIELD } from "../../openai/errors.js";
import { hexId } from "../../openai/ids.js";
import { type RankRequest, rankBody, rankPairs } from "../../openai/rank.js";
import { cannotRank } from "../errors.js";
import { threadsText } from "../load/threads.js";
import {
  type Borrower,
  type ChatMessage,
  type Choice,
  type Engine,
  type GeneratedTokenLogprob,
  type PromptTokenLogprob,
  RequestError,
  type SamplingParams,
  type TokenLogprob,
} from "../types.js";
import { checkRequest, notServed, promptsOf } from "./openai-checks.js";
import { toolCallsBody, toolsParams } from "./openai-tools.js";

const now = () => Math.floor(Date.now() / 1000);

export class LlamaBackend implements InferenceBackend {
  readonly info: BackendInfo;

  /** `name`: what batches and response bodies call the model (the registry's name); default the file's name. */
  constructor(
    private readonly engine: Engine,
    name?: string,
  ) {
    const e = engine.info;
    this.info = Object.freeze({
      model: name ?? e.modelId,
      kind: "local",
      // A model that cannot rank refuses rank and score lines, naming why.
      endpoints: ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/rerank", "/v1/score"] as const,
      // Twice the sequences, so a request is always waiting when a sequence frees up.
      concurrency: 2 * Math.max(1, e.sequences),
      generatedModel: e.generatedModel,
      summary: `${e.sequences} sequences, ${threadsText(e.threads, e.threadsLargeSteps)}, ${e.build} build`,
      settings: {
        model_file: e.modelPath.split(/[\\/]/).pop() ?? e.modelPath,
        gpu: e.gpu,
        gpuLayers: e.gpuLayers,
        threads: e.threads,
        threadsLargeSteps: e.threadsLargeSteps,
        sequences: e.sequences,
        contextSize: e.contextSize,
        embeddingDimensions: e.embeddingDimensions,
        ranking: e.ranking,
        hasChatTemplate: e.hasChatTemplate,
        chatWrapper: e.chatWrapper,
        toolCalling: e.toolCalling,
        reproducible: e.reproducible,
        contexts: e.contexts,
        engineBuild: e.build,
        kvUnified: e.kvUnified,
        flashAttention: e.flashAttention,
      },
    });
  }

  prepareRun(shape: RunShape): Promise<void> {
    return this.engine.prepareRun(shape);
  }

  /** Batch lines that gave their sequence to an interactive request since start (/metrics). */
  preemptions(): number {
    return this.engine.scheduling().preemptions;
  }

  /** Prompt tokens by the model's own tokenizer (the enqueued-token estimate of a batch). */
  countTokens(text: string): number {
    return this.engine.countTokens(text);
  }

  /**
   * The tokens the request's prompt will be evaluated as, counted as execute() renders it (a chat's template and
   * tools included), nothing run; undefined where it is not counted here (rerank and score pairs).
   */
  promptTokens(request: InferenceRequest): number | undefined {
    switch (request.endpoint) {
      case "/v1/chat/completions": {
        const body = request.body as ChatBody;
        return this.engine.chatPromptTokens(body.messages.map(toEngineMessage), toolsParams(body)?.functions ?? []);
      }
      case "/v1/completions":
        return promptsOf(request.body as CompletionBody).reduce(
          (n, p) => n + (typeof p === "string" ? this.engine.countTokens(p) : p.length),
          0,
        );
      case "/v1/embeddings": {
        const input = (request.body as EmbeddingBody).input;
        return (Array.isArray(input) ? input : [input]).reduce<number>(
          (n, t) => n + (typeof t === "string" ? this.engine.countTokens(t) : 0),
          0,
        );
      }
      default:
        return undefined;
    }
  }

  check(request: InferenceRequest): void {
    checkRequest(this.engine, request, this.info.model);
  }

  async execute(request: InferenceRequest, signal?: AbortSignal, options: ExecuteOptions = {}): Promise<BackendResult> {
    // Passed with the request to every pool it waits on (engine/pool/pool.ts).
    const borrower: Borrower = {
      lane: options.lane ?? "batch",
      keepReserve: options.keepReserve ?? true,
      onBegin: options.onBegin,
      cacheScope: options.cacheScope,
    };
    try {
      switch (request.endpoint) {
        case "/v1/chat/completions":
          return await this.chat(request.body, request.topK, signal, options, borrower);
        case "/v1/completions":
          return await this.complete(request.body, signal, options.onText, borrower);
        case "/v1/embeddings":
          return await this.embed(request.body, signal, borrower);
        case "/v1/rerank":
        case "/v1/score":
          return await this.rank(request, signal, borrower);
        default:
          throw notServed(request.endpoint);
      }
    } catch (err) {
      // A prompt too long for the context names the request's prompt field, as OpenAI's refusal does.
      if (err instanceof RequestError && err.code === "context_length_exceeded" && err.param === null)
        throw new RequestError(err.message, err.code, err.retryable, PROMPT_FIELD[request.endpoint] ?? null);
      throw err;
    }
  }

  close(): Promise<void> {
    return this.engine.close();
  }

  // --- execution ---

  private async chat(
    body: ChatBody,
    topK: number | undefined,
    signal: AbortSignal | undefined,
    options: ExecuteOptions,
    borrower: Borrower,
  ): Promise<BackendResult> {
    const params = sampling(body, body.max_completion_tokens ?? body.max_tokens);
    if (options.onText) params.onText = options.onText;
    if (options.onPrompt) params.onPrompt = options.onPrompt;
    if (topK) params.topK = topK;
    if (params.maxTokens !== undefined) params.maxTokensParam = body.max_completion_tokens != null ? "max_completion_tokens" : "max_tokens";
    if (body.logprobs) params.logprobs = body.top_logprobs ?? 0;
    const format = body.response_format;
    if (format?.type === "json_object") params.format = { type: "json_object" };
    if (format?.type === "json_schema" && format.json_schema.schema)
      params.format = { type: "json_schema", schema: format.json_schema.schema };
    const tools = toolsParams(body);
    if (tools) params.tools = tools;
    const r = await this.engine.chat(body.messages.map(toEngineMessage), params, signal, borrower);
    return {
      body: {
        id: `chatcmpl-${hexId()}`,
        object: "chat.completion",
        created: now(),
        model: this.info.model,
        choices: r.choices.map((c, index) => ({
          index,
          message: c.toolCalls
            ? { role: "assistant", content: c.text || null, refusal: null, annotations: [], tool_calls: toolCallsBody(c.toolCalls) }
            : { role: "assistant", content: c.text, refusal: null, annotations: [] },
          logprobs: c.logprobs ? { content: c.logprobs.map(chatLogprob), refusal: null } : null,
          finish_reason: c.finishReason,
        })),
        usage: {
          ...usageBody(r.promptTokens, r.completionTokens),
          prompt_tokens_details: { cached_tokens: r.cachedPromptTokens },
          completion_tokens_details: { reasoning_tokens: 0 },
        },
        service_tier: "default",
        system_fingerprint: null,
      },
      usage: { promptTokens: r.promptTokens, completionTokens: r.completionTokens, cachedTokens: r.cachedPromptTokens },
      stops: r.choices.map((c) => (c.stoppedBy !== undefined && params.stop?.includes(c.stoppedBy) ? c.stoppedBy : null)),
    };
  }

  /** An array prompt runs prompt by prompt (one sequence per request keeps the concurrency bound honest). */
  private async complete(
    body: CompletionBody,
    signal: AbortSignal | undefined,
    onText: ExecuteOptions["onText"],
    borrower: Borrower,
  ): Promise<BackendResult> {
    const prompts = promptsOf(body);
    const params = sampling(body, body.max_tokens);
    if (params.maxTokens !== undefined) params.maxTokensParam = "max_tokens";
    if (body.logprobs != null) params.logprobs = body.logprobs;
    // The prompt's own log probabilities, as eval harnesses score a choice with them.
    if (body.echo && body.logprobs != null) params.promptLogprobs = body.logprobs;
    const usage: TokenUsage = { promptTokens: 0, completionTokens: 0, cachedTokens: 0 };
    const choices: object[] = [];
    for (const prompt of prompts) {
      signal?.throwIfAborted();
      const echoed = !body.echo ? "" : typeof prompt === "string" ? prompt : this.engine.detokenize(prompt);
      // This prompt's choices follow the earlier prompts' in the body; an echoed prompt opens each of its choices.
      const offset = choices.length;
      const opened = new Set<number>();
      if (onText)
        params.onText = (i, text) => {
          onText(offset + i, opened.has(i) ? text : echoed + text);
          opened.add(i);
        };
      const r = await this.engine.complete(prompt, params, signal, borrower);
      usage.promptTokens += r.promptTokens;
      usage.completionTokens += r.completionTokens;
      usage.cachedTokens += r.cachedPromptTokens;
      for (const c of r.choices) {
        choices.push({
          text: echoed + c.text,
          index: choices.length,
          logprobs: c.logprobs || r.promptLogprobs ? completionLogprobs(c, echoed.length, r.promptLogprobs) : null,
          finish_reason: c.finishReason,
        });
      }
    }
    return {
      body: {
        id: `cmpl-${hexId()}`,
        object: "text_completion",
        created: now(),
        model: this.info.model,
        choices,
        // The cached part is on the line as on a chat line (CompletionUsage has it): the batch's usage, which
        // counts it, can then always be recounted from its output file.
        usage: { ...usageBody(usage.promptTokens, usage.completionTokens), prompt_tokens_details: { cached_tokens: usage.cachedTokens } },
      },
      usage,
    };
  }

  private async rank(request: RankRequest, signal: AbortSignal | undefined, borrower: Borrower): Promise<BackendResult> {
    // The engine knows the model by its file; the client by the name it is served under.
    if (!this.engine.info.ranking) throw cannotRank(this.info.model);
    const r = await this.engine.rank(rankPairs(request), PROMPT_FIELD[request.endpoint], signal, borrower);
    return {
      body: rankBody(request, this.info.model, r.scores, r.promptTokens),
      usage: { promptTokens: r.promptTokens, completionTokens: 0, cachedTokens: 0 },
    };
  }

  private async embed(body: EmbeddingBody, signal: AbortSignal | undefined, borrower: Borrower): Promise<BackendResult> {
    const inputs = (Array.isArray(body.input) ? body.input : [body.input]) as string[];
    const r = await this.engine.embed(inputs, signal, borrower);
    return {
      body: {
        object: "list",
        data: r.embeddings.map((vector, index) => ({
          object: "embedding",
          index,
          embedding: body.encoding_format === "base64" ? float32Base64(vector) : vector,
        })),
        model: this.info.model,
        usage: { prompt_tokens: r.promptTokens, total_tokens: r.promptTokens },
      },
      usage: { promptTokens: r.promptTokens, completionTokens: 0, cachedTokens: 0 },
    };
  }
}

/**
 * Text parts are joined with a newline, as llama.cpp's and vLLM's servers join them. An assistant's refusal (its
 * field or a part) is what it said in that turn, so it is shown as its text.
 */
function toEngineMessage(m: ChatMessageBody): ChatMessage {
  const partText = (p: Exclude<ChatMessageBody["content"], string | null | undefined>[number]) =>
    p.type === "refusal" ? p.refusal : "text" in p ? p.text : "";
  let content = m.content == null ? "" : typeof m.content === "string" ? m.content : m.content.map(partText).join("\n");
  if (m.role === "assistant" && m.refusal) content = content ? `${content}\n${m.refusal}` : m.refusal;
  const message: ChatMessage = { role: m.role as ChatMessage["role"], content };
  if (m.role === "assistant" && m.tool_calls?.length) {
    message.toolCalls = m.tool_calls.flatMap((c) => (c.type === "function" ? [{ id: c.id, ...c.function }] : []));
  }
  if (m.role === "tool") message.toolCallId = m.tool_call_id;
  return message;
}

function sampling(b: ChatBody | CompletionBody, maxTokens: number | null | undefined): SamplingParams {
  const p: SamplingParams = {};
  if (maxTokens != null) p.maxTokens = maxTokens;
  if (b.temperature != null) p.temperature = b.temperature;
  if (b.top_p != null) p.topP = b.top_p;
  if (b.stop != null) {
    const stop = (typeof b.stop === "string" ? [b.stop] : b.stop).filter((s) => s.length > 0);
    if (stop.length > 0) p.stop = stop;
  }
  if (b.seed != null) p.seed = b.seed;
  if (b.frequency_penalty != null) p.frequencyPenalty = b.frequency_penalty;
  if (b.presence_penalty != null) p.presencePenalty = b.presence_penalty;
  if (b.logit_bias != null) p.logitBias = new Map(Object.entries(b.logit_bias).map(([k, v]) => [Number(k), v]));
  if (b.n != null) p.n = b.n;
  return p;
}

const chatLogprob = (l: GeneratedTokenLogprob) => ({
  token: l.token,
  logprob: l.logprob,
  bytes: l.bytes,
  top_logprobs: l.top,
});

/**
 * The legacy completions shape: parallel arrays, and each position's alternatives as a token -> logprob map. An
 * echoed prompt's tokens come first, the first with null for its log probability and its alternatives.
 */
function completionLogprobs(c: Choice, startOffset: number, prompt: readonly PromptTokenLogprob[] = []) {
  const entries = c.logprobs ?? [];
  const text_offset = entries.map((l) => startOffset + l.offset);
  const top = (alternatives: readonly TokenLogprob[]) => Object.fromEntries(alternatives.map((t) => [t.token, t.logprob]));
  return {
    tokens: [...prompt.map((p) => p.token), ...entries.map((l) => l.token)],
    token_logprobs: [...prompt.map((p) => p.logprob), ...entries.map((l) => l.logprob)],
    top_logprobs: [...prompt.map((p) => (p.top ? top(p.top) : null)), ...entries.map((l) => top(l.top))],
    text_offset: [...prompt.map((p) => p.offset), ...text_offset],
  };
}

const usageBody = (prompt: number, completion: number) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
});

/** OpenAI's base64 embeddings: the float32 values, little-endian, base64-encoded. */
export function float32Base64(vector: readonly number[]): string {
  const buf = Buffer.allocUnsafe(vector.length * 4);
  for (const [i, v] of vector.entries()) buf.writeFloatLE(v, i * 4);
  return buf.toString("base64");
}
