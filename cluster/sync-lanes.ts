// The `SyncInference` port in a process that serves its models: a synchronous request checked as a batch line of
// its endpoint is, then admitted to its lane for that model and run on the model's backend. The interactive lane
// (the default tier) holds at most a share of the model's sequences at once and is served before the batches'
// waiting lines (engine/lane.ts); the flex tier runs as batch work does. Beyond the running ones each lane keeps a
// bounded queue; a request that finds it full is refused at once with a Retry-After, never left to wait unseen.

import type { Logger } from "pino";
import type { ModelRouter } from "../backends/router.js";
import { InvalidRequestError, laneFull, ModelNotFoundError, shuttingDown, UnavailableError } from "../domain/errors.js";
import {
  type LaneView,
  type ServedTier,
  STREAMED,
  type SyncAnswer,
  type SyncInference,
  type SyncRequest,
} from "../domain/sync-inference.js";
import type { LaneMetrics } from "../metrics/lane-metrics.js";
import type { Endpoint, InferenceBackend, InferenceRequest } from "../openai/backend.js";
import { RequestError } from "../openai/errors.js";
import { parseRequest } from "../openai/parse.js";
import { lineTokens, type TokenCounter } from "../pipeline/token-estimate.js";
import type { SyncAccounts } from "./sync-accounts.js";

export interface LaneSettings {
  interactiveMaxShare: number;
  interactiveQueueMax: number;
  flexQueueMax: number;
}

/** What a full lane's 429 asks a client to wait: an interactive answer frees a sequence in seconds, a flex wait is longer. */
const RETRY_AFTER_SECONDS: Record<ServedTier, number> = { default: 1, flex: 10 };
/** A request refused at shutdown is retried once another process (or this one, restarted) serves the model. */
const SHUTDOWN_RETRY_AFTER_SECONDS = 5;

export interface SyncLanesDeps {
  /** Enqueued-token limits and usage, as batch lines count them (none: neither is kept). */
  accounts?: SyncAccounts;
  /** The prompt's tokens by the model's tokenizer where this process has it. */
  countTokens?: TokenCounter;
  metrics?: LaneMetrics;
  /**
   * Whether a batch of the model is at risk of its deadline: the interactive lane then gives its share back (one
   * request at a time, no sequence kept free for it) until none is.
   */
  atRisk?: (model: string) => boolean;
  logger?: Pick<Logger, "warn" | "info">;
}

export class SyncLanes implements SyncInference {
  private readonly gates = new Map<string, Gate>();
  /** Aborted at shutdown: each request still running ends with shutting_down (a stream, with its error event). */
  private readonly stopping = new AbortController();

  constructor(
    private readonly models: ModelRouter,
    private readonly settings: LaneSettings,
    private readonly deps: SyncLanesDeps = {},
  ) {
    deps.metrics?.watchLanes(() =>
      [...this.gates.values()].map((g) => ({ tier: g.tier, model: g.model, running: g.running, waiting: g.waiting })),
    );
  }

  lanes(): LaneView[] {
    return [...this.gates.values()].map((g) => ({
      tier: g.tier,
      model: g.model,
      running: g.running,
      room: g.room(),
      waiting: g.waiting,
      queue_max: g.queueMax,
      served: g.served,
      refused: g.refused,
    }));
  }

  private get metrics(): LaneMetrics | undefined {
    return this.deps.metrics;
  }

  async run(request: SyncRequest): Promise<SyncAnswer> {
    if (this.stopping.signal.aborted) throw shuttingDown(SHUTDOWN_RETRY_AFTER_SECONDS);
    try {
      return await this.serve({ ...request, signal: AbortSignal.any([request.signal, this.stopping.signal]) });
    } catch (err) {
      if (this.stopping.signal.aborted && !request.signal.aborted) throw shuttingDown(SHUTDOWN_RETRY_AFTER_SECONDS);
      throw err;
    }
  }

  /** Refuses new requests, ends those running with shutting_down, and writes the usage not yet written. */
  async close(): Promise<void> {
    this.stopping.abort(shuttingDown(SHUTDOWN_RETRY_AFTER_SECONDS));
    await this.deps.accounts?.close();
  }

  private async serve({ owner, endpoint, body, signal, stream }: SyncRequest): Promise<SyncAnswer> {
    const request = parse(endpoint, body, stream !== undefined);
    const tier = tierOf(body);
    const named = (body as { model?: unknown }).model;
    const spec = this.models.registry.resolve(typeof named === "string" ? named : undefined);
    if (!spec) throw new ModelNotFoundError(String(named), this.models.registry.names);
    const lease = await this.models.acquire(spec.name, signal).catch((err) => {
      if (signal.aborted) throw err;
      throw new UnavailableError(`The model '${spec.name}' is not available: ${(err as Error).message}`, "backend_unavailable", 5);
    });
    let release: (() => void) | undefined;
    try {
      const { backend } = lease;
      refused(() => backend.check(request));
      const tokens = lineTokens(endpoint, body as Record<string, unknown>, this.deps.countTokens);
      release = await this.counted(tier, spec.name, signal, async () => this.deps.accounts?.hold(owner, spec.name, tokens));
      const gate = this.gate(spec.name, tier, backend);
      const givenBack = tier === "default" && this.givenBack(gate);
      const started = performance.now();
      await this.counted(tier, spec.name, signal, () => gate.enter(signal));
      try {
        stream?.begin({ model: backend.info.model, tier });
        const lane = tier === "default" ? "interactive" : "batch";
        let first: number | undefined;
        const onText = (index: number, text: string) => {
          first ??= performance.now();
          stream?.text(index, text);
        };
        const admitted = performance.now();
        const result = await this.counted(tier, spec.name, signal, () =>
          backend.execute(request, signal, { lane, onText, reserve: !givenBack }).catch((err) => {
            throw domainError(err);
          }),
        );
        this.metrics?.laneRequest(tier, spec.name, "completed");
        gate.served++;
        this.observe(tier, spec.name, started, first, result.usage.completionTokens);
        // Engine time as a batch line's: its share of the engine while it held a sequence; an upstream's is none.
        const held = backend.info.kind === "local" ? (performance.now() - admitted) / 1000 / Math.max(1, backend.info.concurrency) : 0;
        this.deps.accounts?.record({ owner, model: spec.name, endpoint, tier, usage: result.usage, seconds: held });
        return { body: withTier(endpoint, result.body, tier), tier };
      } finally {
        gate.leave();
      }
    } finally {
      release?.();
      lease.release();
    }
  }

  /** Whether the interactive lane has given its share back to an at-risk batch; each change is logged and counted. */
  private givenBack(gate: Gate): boolean {
    const now = this.deps.atRisk?.(gate.model) ?? false;
    if (now !== gate.givenBack) {
      gate.givenBack = now;
      if (now) {
        this.metrics?.laneTakeback(gate.model);
        this.deps.logger?.warn(
          { model: gate.model },
          "a batch is at risk of its deadline: the interactive lane gives back its share (one request at a time, no sequence held for it)",
        );
      } else this.deps.logger?.info({ model: gate.model }, "no batch at risk any more: the interactive lane has its share again");
    }
    return now;
  }

  /** `work`, its failure counted as the request's outcome: a full lane refused it, its client left, or it failed. */
  private async counted<T>(tier: ServedTier, model: string, signal: AbortSignal, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      const outcome = signal.aborted
        ? "disconnected"
        : err instanceof UnavailableError && (err.code === "resource_unavailable" || err.code === "token_limit_exceeded")
          ? "refused"
          : "failed";
      this.metrics?.laneRequest(tier, model, outcome);
      throw err;
    }
  }

  /** Time to the first token, and per token after it, of a request that generated. */
  private observe(tier: ServedTier, model: string, started: number, first: number | undefined, tokens: number): void {
    if (first === undefined || tokens === 0) return;
    const end = performance.now();
    this.metrics?.laneLatency(tier, model, (first - started) / 1000, tokens > 1 ? (end - first) / 1000 / (tokens - 1) : undefined);
  }

  /** The model's gate for the tier; its room follows the backend's concurrency as it stands. */
  private gate(model: string, tier: ServedTier, backend: InferenceBackend): Gate {
    const key = `${tier}\u0000${model}`;
    let gate = this.gates.get(key);
    if (!gate) {
      const { interactiveMaxShare, interactiveQueueMax, flexQueueMax } = this.settings;
      const share = () => Math.max(1, Math.floor(backend.info.concurrency * interactiveMaxShare));
      gate =
        tier === "default"
          ? new Gate(tier, model, () => (this.deps.atRisk?.(model) ? 1 : share()), interactiveQueueMax)
          : new Gate(tier, model, () => Math.max(1, backend.info.concurrency), flexQueueMax);
      this.gates.set(key, gate);
    }
    return gate;
  }
}

/** Room for `room()` requests at once, then a FIFO queue of at most `queueMax`; a request past both is refused. */
class Gate {
  running = 0;
  served = 0;
  refused = 0;
  /** The interactive lane's share is given back to an at-risk batch (its room is then one). */
  givenBack = false;
  private readonly queue: Array<() => void> = [];

  get waiting(): number {
    return this.queue.length;
  }

  constructor(
    readonly tier: ServedTier,
    readonly model: string,
    readonly room: () => number,
    readonly queueMax: number,
  ) {}

  enter(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    if (this.running < this.room() && this.queue.length === 0) {
      this.running++;
      return Promise.resolve();
    }
    if (this.queue.length >= this.queueMax) {
      this.refused++;
      return Promise.reject(laneFull(this.tier, RETRY_AFTER_SECONDS[this.tier]));
    }
    return new Promise<void>((resolve, reject) => {
      const admit = () => {
        signal.removeEventListener("abort", onAbort);
        this.running++;
        resolve();
      };
      const onAbort = () => {
        const i = this.queue.indexOf(admit);
        if (i !== -1) this.queue.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.queue.push(admit);
    });
  }

  leave(): void {
    this.running--;
    while (this.running < this.room() && this.queue.length > 0) this.queue.shift()!();
  }
}

/** The tier a body asks for: flex, or the default for everything else OpenAI names ("auto", "priority", "scale"). */
function tierOf(body: unknown): ServedTier {
  return (body as { service_tier?: unknown } | null)?.service_tier === "flex" ? "flex" : "default";
}

/**
 * The request a body makes. `stream` and `stream_options` are this route's to honour (a batch line refuses them):
 * checked here, then left out of what the backend sees.
 */
function parse(endpoint: Endpoint, body: unknown, streamed: boolean): InferenceRequest {
  const b = (body ?? {}) as Record<string, unknown>;
  if (b.stream === true && !STREAMED.includes(endpoint))
    throw new InvalidRequestError(`${endpoint} answers whole here: stream is not served for it.`, "unsupported_value", "stream");
  if (b.stream === true && !streamed) throw new Error("a streamed request came without its stream");
  if (!STREAMED.includes(endpoint) || typeof body !== "object" || body === null) return refused(() => parseRequest(endpoint, body));
  if (endpoint === "/v1/messages" || endpoint === "/v1/responses") {
    // Their stream is a boolean; Anthropic's schema checks it, and neither takes OpenAI's chat stream options here.
    const { stream: _, ...rest } = b;
    if (typeof b.stream !== "boolean" && b.stream !== undefined) return refused(() => parseRequest(endpoint, body));
    return refused(() => parseRequest(endpoint, rest));
  }
  const { stream, stream_options, ...rest } = b;
  if (stream !== undefined && stream !== null && typeof stream !== "boolean")
    throw new InvalidRequestError("Invalid type for 'stream': expected a boolean.", "invalid_type", "stream");
  if (stream_options !== undefined && stream_options !== null) {
    if (stream !== true)
      throw new InvalidRequestError("stream_options is only allowed when stream is true.", "invalid_request", "stream_options");
    checkStreamOptions(stream_options);
  }
  return refused(() => parseRequest(endpoint, rest));
}

/** OpenAI's stream options: include_usage, and include_obfuscation (whose padding this service never adds). */
function checkStreamOptions(o: unknown): void {
  const known = ["include_usage", "include_obfuscation"];
  if (typeof o !== "object" || o === null || Array.isArray(o))
    throw new InvalidRequestError("Invalid type for 'stream_options': expected an object.", "invalid_type", "stream_options");
  const unknown = Object.keys(o).find((k) => !known.includes(k));
  if (unknown !== undefined)
    throw new InvalidRequestError(
      `Unrecognized stream option '${unknown}': stream_options takes include_usage and include_obfuscation.`,
      "unknown_parameter",
      `stream_options.${unknown}`,
    );
  for (const k of known) {
    const v = (o as Record<string, unknown>)[k];
    if (v !== undefined && typeof v !== "boolean")
      throw new InvalidRequestError(`Invalid type for 'stream_options.${k}': expected a boolean.`, "invalid_type", `stream_options.${k}`);
  }
}

/** A backend's refusal as the control plane's: a bad request is a 400 naming the field, a transient failure a 503. */
function domainError(err: unknown): unknown {
  if (!(err instanceof RequestError)) return err;
  if (err.retryable) return new UnavailableError(err.message, "backend_unavailable", 1, { cause: err });
  return new InvalidRequestError(err.message, err.code, err.param);
}

function refused<T>(work: () => T): T {
  try {
    return work();
  } catch (err) {
    throw domainError(err);
  }
}

/** The body naming the tier that served it: OpenAI's `service_tier`, Anthropic's `usage.service_tier` ("standard"). */
function withTier(endpoint: Endpoint, body: Record<string, unknown>, tier: ServedTier): Record<string, unknown> {
  if (endpoint === "/v1/messages") return { ...body, usage: { ...(body.usage as object), service_tier: "standard" } };
  return { ...body, service_tier: tier };
}
