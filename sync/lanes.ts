// The `SyncInference` port in a process that serves its models: a synchronous request checked as a batch line of
// its endpoint is (request.ts), then let into its lane's room for that model (lane-room.ts) and run on the model's
// backend, told its lane. The interactive lane (service tier default) holds at most a share of the model's sequences
// at once and is served before the batches' waiting lines (engine/pool/pool.ts); the batch lane (service tier flex)
// waits with them. Its requests count against their key's limits and usage as batch lines do (tenancy/sync-accounts.ts).
import type { Logger } from "pino";
import type { ModelRouter } from "../backends/router.js";
import { OPEN_SCOPE } from "../cache/caching-backend.js";
import { InvalidRequestError, ModelNotFoundError, shuttingDown, UnavailableError } from "../domain/errors.js";
import {
  LANE_OF_TIER,
  type LaneView,
  type ServedTier,
  type SyncAnswer,
  type SyncInference,
  type SyncRequest,
} from "../domain/sync-inference.js";
import type { LaneMetrics } from "../metrics/lane-metrics.js";
import type { InferenceBackend, Lane } from "../openai/backend.js";
import { lineTokens, type TokenCounter } from "../pipeline/token-estimate.js";
import type { SyncAccounts } from "../tenancy/sync-accounts.js";
import { LaneRoom } from "./lane-room.js";
import { domainError, parse, tierOf, withDomainErrors, withTier } from "./request.js";

export interface LaneSettings {
  interactiveMaxShare: number;
  interactiveQueueMax: number;
  flexQueueMax: number;
}

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
  /** Whose remembered answers an owner's requests share (the result cache's scope; KeyRing.cacheScopeOf). */
  cacheScope?: (owner: string | null) => string | null;
}

export class SyncLanes implements SyncInference {
  private readonly rooms = new Map<string, LaneRoom>();
  /** Aborted at shutdown: each request still running ends with shutting_down (a stream, with its error event). */
  private readonly stopping = new AbortController();

  constructor(
    private readonly models: ModelRouter,
    private readonly settings: LaneSettings,
    private readonly deps: SyncLanesDeps = {},
  ) {
    deps.metrics?.watchLanes(() =>
      [...this.rooms.values()].map((r) => ({ tier: r.tier, model: r.model, running: r.running, waiting: r.waiting })),
    );
  }

  lanes(): LaneView[] {
    return [...this.rooms.values()].map((r) => ({
      tier: r.tier,
      model: r.model,
      running: r.running,
      room: r.size(),
      waiting: r.waiting,
      queue_max: r.queueMax,
      served: r.served,
      refused: r.refused,
    }));
  }

  private get metrics(): LaneMetrics | undefined {
    return this.deps.metrics;
  }

  async run(request: SyncRequest): Promise<SyncAnswer> {
    if (this.stopping.signal.aborted) throw shuttingDown(SHUTDOWN_RETRY_AFTER_SECONDS, "requests");
    try {
      return await this.serve({ ...request, signal: AbortSignal.any([request.signal, this.stopping.signal]) });
    } catch (err) {
      if (this.stopping.signal.aborted && !request.signal.aborted) throw shuttingDown(SHUTDOWN_RETRY_AFTER_SECONDS, "stopped");
      throw err;
    }
  }

  /** Refuses new requests, ends those running with shutting_down, and writes the usage not yet written. */
  async close(): Promise<void> {
    this.stopping.abort(shuttingDown(SHUTDOWN_RETRY_AFTER_SECONDS, "stopped"));
    await this.deps.accounts?.close();
  }

  private async serve({ owner, endpoint, body, signal, stream, noCache }: SyncRequest): Promise<SyncAnswer> {
    const request = parse(endpoint, body, stream !== undefined);
    const tier = tierOf(body);
    const lane = LANE_OF_TIER[tier];
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
      withDomainErrors(() => backend.check(request));
      const tokens = lineTokens(endpoint, body as Record<string, unknown>, this.deps.countTokens);
      release = await this.failureCounted(tier, spec.name, signal, async () => this.deps.accounts?.hold(owner, spec.name, tokens));
      const room = this.room(spec.name, lane, backend);
      const batchAtRisk = lane === "interactive" && this.batchAtRisk(room);
      const started = performance.now();
      await this.failureCounted(tier, spec.name, signal, () => room.enter(signal));
      try {
        stream?.begin({ model: backend.info.model, tier });
        let first: number | undefined;
        const onText = (index: number, text: string) => {
          first ??= performance.now();
          stream?.text(index, text);
        };
        const admitted = performance.now();
        const onPrompt = stream && ((u: Parameters<typeof stream.prompt>[0]) => stream.prompt(u));
        const options = {
          lane,
          keepReserve: !batchAtRisk,
          onText,
          onPrompt,
          // An open API's one scope, as its batches have: a synchronous prompt reuses what its batches cached.
          cacheScope: this.deps.cacheScope?.(owner) ?? OPEN_SCOPE,
          useCache: !noCache,
        };
        const result = await this.failureCounted(tier, spec.name, signal, () =>
          backend.execute(request, signal, options).catch((err) => {
            throw domainError(err);
          }),
        );
        this.metrics?.laneRequest(tier, spec.name, "completed");
        room.served++;
        this.observe(tier, spec.name, started, first, result.usage.completionTokens);
        // Engine time as a batch line's: its share of the engine while it held a sequence; an upstream's is none.
        const held = backend.info.kind === "local" ? (performance.now() - admitted) / 1000 / Math.max(1, backend.info.concurrency) : 0;
        const cached = result.cached !== undefined;
        this.deps.accounts?.record({ owner, model: spec.name, endpoint, tier, usage: result.usage, cached, seconds: held });
        return { body: withTier(endpoint, result.body, tier), tier, usage: result.usage };
      } finally {
        room.leave();
      }
    } finally {
      release?.();
      lease.release();
    }
  }

  /**
   * Whether a batch of the room's model is at risk of its deadline, so the interactive lane gives its share back;
   * each change is logged and counted.
   */
  private batchAtRisk(room: LaneRoom): boolean {
    const now = this.deps.atRisk?.(room.model) ?? false;
    if (now !== room.batchAtRisk) {
      room.batchAtRisk = now;
      if (now) {
        this.metrics?.laneTakeback(room.model);
        this.deps.logger?.warn(
          { model: room.model, lane: room.lane },
          "a batch is at risk of its deadline: the interactive lane gives back its share (one request at a time, no sequence held for it)",
        );
      } else
        this.deps.logger?.info(
          { model: room.model, lane: room.lane },
          "no batch at risk any more: the interactive lane has its share again",
        );
    }
    return now;
  }

  /**
   * `work` (which throws the control plane's errors: domainError), its failure counted as the request's outcome: a
   * full lane refused it, its client left, the request was at fault (a 400: a context overflow, a parameter the model
   * refuses), or it failed.
   */
  private async failureCounted<T>(tier: ServedTier, model: string, signal: AbortSignal, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      const outcome = signal.aborted
        ? "disconnected"
        : err instanceof UnavailableError && (err.code === "resource_unavailable" || err.code === "token_limit_exceeded")
          ? "refused"
          : err instanceof InvalidRequestError
            ? "invalid"
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

  /** The model's room in the lane; its size follows the backend's concurrency as it stands. */
  private room(model: string, lane: Lane, backend: InferenceBackend): LaneRoom {
    const key = `${lane}\u0000${model}`;
    let room = this.rooms.get(key);
    if (!room) {
      const { interactiveMaxShare, interactiveQueueMax, flexQueueMax } = this.settings;
      const share = () => Math.max(1, Math.floor(backend.info.concurrency * interactiveMaxShare));
      room =
        lane === "interactive"
          ? new LaneRoom(lane, model, () => (this.deps.atRisk?.(model) ? 1 : share()), interactiveQueueMax)
          : new LaneRoom(lane, model, () => Math.max(1, backend.info.concurrency), flexQueueMax);
      this.rooms.set(key, room);
    }
    return room;
  }
}
