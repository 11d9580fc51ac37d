// The port every inference backend implements: it receives a validated OpenAI request body for one endpoint
// and answers with that endpoint's OpenAI response body. The pipeline and the control plane see only this;
// how a backend computes (node-llama-cpp in-process, an upstream HTTP server) stays behind it.
import type { ChatBody, CompletionBody, EmbeddingBody } from "./bodies.js";
import type { RankRequest } from "./rank.js";
import type { ResponseBody } from "./response-bodies.js";

/**
 * The endpoints every backend serves (Responses and Anthropic's Messages over chat), in OpenAI's order, then
 * Anthropic's (whose body anthropic/ defines and checks), then the ranking ones vLLM's run_batch takes
 * (openai/rank.ts; a model that cannot rank refuses their lines): the one list of them.
 */
export const ENDPOINTS = [
  "/v1/responses",
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/embeddings",
  "/v1/messages",
  "/v1/rerank",
  "/v1/score",
] as const;
export type Endpoint = (typeof ENDPOINTS)[number];
export const isEndpoint = (v: unknown): v is Endpoint => (ENDPOINTS as readonly unknown[]).includes(v);
/** The endpoints whose bodies another folder's schema checks: Anthropic's Messages (anthropic/params.ts). */
export type ForeignEndpoint = "/v1/messages";
/** The endpoints whose bodies this folder defines (openai/parse.ts checks them). */
export type OpenAIEndpoint = Exclude<Endpoint, ForeignEndpoint>;
/** Endpoints whose lines generate no tokens: they read their input and answer vectors or scores. */
export const READS_ONLY: readonly Endpoint[] = ["/v1/embeddings", "/v1/rerank", "/v1/score"];

export type InferenceRequest =
  | {
      endpoint: "/v1/chat/completions";
      body: ChatBody;
      /** Anthropic's top_k (a Messages request's), which OpenAI's chat body does not define. */
      topK?: number;
    }
  | { endpoint: "/v1/completions"; body: CompletionBody }
  | { endpoint: "/v1/embeddings"; body: EmbeddingBody }
  | { endpoint: "/v1/responses"; body: ResponseBody }
  /** A body its own folder's schema checked (parse/request.ts), whose fields are that folder's to read. */
  | { endpoint: ForeignEndpoint; body: Record<string, unknown> }
  | RankRequest;

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

export interface BackendResult {
  /** The endpoint's OpenAI response body (chat.completion, text_completion, embedding list, response). */
  body: Record<string, unknown>;
  usage: TokenUsage;
  /** Per choice, the stop string that ended it (null: another end), where the backend knows it. */
  stops?: Array<string | null>;
  /**
   * Set when the answer was not computed for this request (cache/caching-backend.ts): "duplicate", an identical
   * request in flight computed it; "hit", the result cache held it.
   */
  cached?: "duplicate" | "hit";
}

export interface BackendInfo {
  /** What response bodies and batches name as `model`: the model that actually serves. */
  model: string;
  /** "local" for the in-process engine. */
  kind: string;
  endpoints: readonly Endpoint[];
  /** Requests worth keeping in flight at once to keep the backend busy. */
  concurrency: number;
  /** True when serving the project's generated random-weights model. */
  generatedModel: boolean;
  /** Settings shown on /ready and in logs: nothing secret, no paths. */
  settings: Readonly<Record<string, string | number | boolean | null>>;
  /** One line for banners, e.g. "32 sequences, 1-2 threads". */
  summary: string;
}

/** Flow-control figures of a backend that sends requests elsewhere (an upstream server). */
export interface BackendStats {
  /** Requests sent and not yet answered, and how many may be. */
  inFlight: number;
  limit: number;
  /** Waiting for room under the limit. */
  waiting: number;
  /** Smoothed latency of successful requests, in ms. */
  latencyMs: number;
  requests: number;
  retries: number;
  /** Failed attempts by cause: an HTTP status, "timeout" or "connection". */
  errors: Record<string, number>;
  /** Times the limit was cut, by cause ("overload", "latency"). */
  decreases: Record<string, number>;
}

/**
 * The order a batch's lines start in (pipeline/schedule.ts): "cost", longest first with prefix families together;
 * "interleave", families taking turns; "file", as the file has them.
 */
export type LineOrder = "cost" | "interleave" | "file";

/** A planned run, as pipeline/schedule.ts sees it: its lines, and those opening with the same text as another line. */
export interface RunShape {
  lines: number;
  familyLines: number;
}

/** A backend's preferred order; for "interleave", how many families should run at once (a server's slots). */
export interface LinePreference {
  order: LineOrder;
  lanes?: number;
}

/**
 * Where a request waits for a backend's capacity, named for who waits for it (docs/architecture.md, "Glossary"):
 * "interactive", a client holding a connection open (a synchronous request of the default service tier); "batch",
 * nobody at a connection (a batch's line, a dataset job's row, a synchronous request of the flex service tier).
 */
export type Lane = "interactive" | "batch";

export interface ExecuteOptions {
  /** "batch" when absent. */
  lane?: Lane;
  /**
   * For the interactive lane: whether the engine keeps a sequence free for the lane's next request, its reserve (true
   * when absent). False while a batch of the model is at risk of its deadline: the batches take that sequence back.
   */
  keepReserve?: boolean;
  /**
   * Told a chat or completion request's answer as it is generated, per choice (the `index` of its final body), where
   * the backend can: the pieces of a choice begin its final text, and the final body holds whatever is not told.
   */
  onText?: (choice: number, text: string) => void;
  /**
   * Told when the request begins to take the backend's capacity: the engine lends it a sequence (or an embedding or
   * ranking context), or an upstream is sent it. A request that ends before was refused, or never ran; a caller may
   * still call it off while it waits (a drained run's lines go back unrun: a pause, a cancel, the runner's Ctrl-C),
   * not once it has begun. May be told again (a line that gave its sequence to an interactive request takes one
   * anew).
   */
  onBegin?: () => void;
  /**
   * Told a chat request's prompt tokens (and how many of them a cache held) once they are known, before its first
   * text, where the backend can: a stream's opening event names them, as Anthropic's does.
   */
  onPrompt?: (usage: Pick<TokenUsage, "promptTokens" | "cachedTokens">) => void;
  /**
   * Whose answers a deterministic request may share (cache/caching-backend.ts): its key's owner, or the cache the keys
   * file names for several keys. Absent: the open API's one scope.
   */
  cacheScope?: string;
  /** False: the request neither reads nor fills the result cache, nor joins an identical one in flight. */
  useCache?: boolean;
  /**
   * True: the caller keeps the answer on disk (a batch's line), so a computed answer is returned only once the result
   * cache holds it. Else a crash between the line and the store would leave the line's repeats to compute it again.
   */
  waitForStore?: boolean;
  /**
   * Told once the request needs no more of the backend's work: its answer is known (before the store the caller
   * waits for), or it waits for an identical request's. A caller that bounds how many requests compute at once lets
   * the next one begin (pipeline/compute-gate.ts).
   */
  onBackendDone?: () => void;
}

export interface InferenceBackend {
  readonly info: BackendInfo;
  /**
   * The line order that suits this backend, where it has a preference (an upstream's prefix routing:
   * upstream/slot-affinity.ts). Asked once per run whose order is the default, "cost".
   */
  lineOrder?(): Promise<LinePreference>;
  /**
   * What a run is about to send, told once its lines are planned and before the first starts, so the backend may
   * set itself up for it (the engine's KV cache: engine/pool/kv-choice.ts). Resolves when it is ready.
   */
  prepareRun?(shape: RunShape): Promise<void>;
  /** Tokens in `text` by the model's tokenizer, where this process has it (a local model). */
  countTokens?(text: string): number;
  /** The tokens a request's prompt will be evaluated as (a chat's template included), counted without running it. */
  promptTokens?(request: InferenceRequest): number | undefined;
  /**
   * Whether the result cache holds an answer for this request in this scope now (cache/caching-backend.ts): read
   * without computing or refreshing anything, for a plan.
   */
  remembered?(request: InferenceRequest, options?: Pick<ExecuteOptions, "cacheScope" | "useCache">): Promise<boolean>;
  /**
   * The answer the result cache holds for this request now, told as a hit (ids of its own, its prompt counted as
   * cached), or undefined: it must run. Computes nothing and waits for no computation, so a batch answers its
   * remembered lines without a turn on the backend (pipeline/run-batch.ts). A store that fails is a miss.
   */
  answerFromCache?(
    request: InferenceRequest,
    options?: Pick<ExecuteOptions, "cacheScope" | "useCache">,
  ): Promise<BackendResult | undefined>;
  /** Present with answerFromCache: the result cache's commits cross a network (ResultCache.remote). */
  storesRemotely?: boolean;
  /** Present on backends that drive an upstream: what /metrics shows per backend. */
  stats?(): BackendStats;
  /** Present on the local engine: batch lines that gave their sequence to an interactive request since start. */
  preemptions?(): number;
  /**
   * Throws a non-retryable RequestError naming the parameter when the request asks for something this backend
   * cannot honour; cheap, so it runs for every line before the request is queued for the backend.
   */
  check(request: InferenceRequest): void;
  /**
   * Runs a request that passed `check`. Transient failures throw a retryable RequestError. A request of the
   * interactive lane (a synchronous call at the default tier) is served before the batch lane's waiting work.
   */
  execute(request: InferenceRequest, signal?: AbortSignal, options?: ExecuteOptions): Promise<BackendResult>;
  close(): Promise<void>;
}
