// Synchronous inference: a client's request answered on the connection it holds open, by the same models,
// validation and engine as batch lines, beside the batches. Two lanes share each model: the interactive lane
// (service tier default) is served before waiting batch work, up to a share of the model's sequences; a request of
// service tier flex runs in the batch lane, with the batches. Either lane's room, once its queue is full, refuses
// with a Retry-After (UnavailableError).
import type { Endpoint, Lane, TokenUsage } from "../openai/backend.js";
import type { Owner } from "./ports.js";

/** The tier that served a request, as OpenAI's responses name it. */
export type ServedTier = "default" | "flex";

/** The lane a synchronous request runs in, by the service tier it was served at (docs/architecture.md, "Glossary"). */
export const LANE_OF_TIER: Readonly<Record<ServedTier, Lane>> = { default: "interactive", flex: "batch" };

/** The service tier a synchronous request of each lane was served at: what answers, 429s and /metrics' `tier` say. */
export const TIER_OF_LANE: Readonly<Record<Lane, ServedTier>> = { interactive: "default", batch: "flex" };

export interface SyncRequest {
  owner: Owner;
  endpoint: Endpoint;
  /** The body as the client sent it. */
  body: unknown;
  /** Aborted when the client goes away: its sequence is freed at once. */
  signal: AbortSignal;
  /** For a streamed request (`stream: true`: chat, completions, responses, Anthropic's messages): told the answer as it is generated. */
  stream?: SyncStream;
}

export interface SyncStream {
  /** Once the request is admitted and its model known, before any text. */
  begin(meta: { model: string; tier: ServedTier }): void;
  /** A piece of choice `index`'s answer; the final body holds what is not told here. */
  text(index: number, text: string): void;
  /** The prompt's tokens, before the first text, where the backend tells them (the local engine's chat). */
  prompt(usage: Pick<TokenUsage, "promptTokens" | "cachedTokens">): void;
}

/** The endpoints that stream (`stream: true`); the others answer whole. */
export const STREAMED: readonly Endpoint[] = ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"];

export interface SyncAnswer {
  /** The endpoint's response body, naming its tier. */
  body: Record<string, unknown>;
  tier: ServedTier;
  usage: TokenUsage;
}

/** One lane of one model as the console shows it. */
export interface LaneView {
  tier: ServedTier;
  model: string;
  /** Requests running, and how many may at once now. */
  running: number;
  room: number;
  /** Requests waiting for room, and how many may wait. */
  waiting: number;
  queue_max: number;
  /** Since the process started: answered, and refused because the lane was full. */
  served: number;
  refused: number;
}

export interface SyncInference {
  /** Throws InvalidRequestError (a bad body, a refused parameter), NotFoundError (an unknown model) or UnavailableError. */
  run(request: SyncRequest): Promise<SyncAnswer>;
  /** At shutdown: refuses new requests and ends running ones with shutting_down (streams, with an error event). */
  close?(): Promise<void>;
  /** Each lane that has had a request, by model. */
  lanes?(): LaneView[];
}

/** A worker that serves a synchronous request's model, in the distributed mode. */
export interface SyncTarget {
  /** Its base URL (WORKER_URL): the request goes to `${url}${endpoint}`. */
  url: string;
  /** A request is sent there: it counts in the worker's load until the returned function is called (it ended). */
  sending(): () => void;
}

/** How an API server (ROLE=api), which runs no model, finds the workers that answer synchronous requests. */
export interface SyncTargets {
  /**
   * The live workers serving the model a body names (its name or an alias; the default model where it names
   * none), least loaded first. Throws ModelNotFoundError, or
   * UnavailableError (backend_unavailable) when no live worker serves it.
   */
  pick(model: unknown): Promise<SyncTarget[]>;
  /**
   * Watches the worker at `url` while a request runs there: `onLost` is called once when it is no longer heard from
   * (dead, frozen or cut off: its heartbeat lapsed). Returns the function that stops watching.
   */
  watch(url: string, onLost: () => void): () => void;
}
