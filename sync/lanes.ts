// The `SyncInference` port in a process that serves its models: a synchronous request checked as a batch line of
// its endpoint is (sync-request.ts), then admitted to its lane for that model (lane-gate.ts) and run on the model's
// backend. The interactive lane (the default tier) holds at most a share of the model's sequences at once and is
// served before the batches' waiting lines (engine/pool/lane.ts); the flex tier runs as batch work does. Its requests
// count against their key's limits and usage as batch lines do (sync-accounts.ts).
import type { Logger } from "pino";
import type { ModelRouter } from "../backends/router.js";
import { ModelNotFoundError, shuttingDown, UnavailableError } from "../domain/errors.js";
import type { LaneView, ServedTier, SyncAnswer, SyncInference, SyncRequest } from "../domain/sync-inference.js";
import type { LaneMetrics } from "../metrics/lane-metrics.js";
import type { InferenceBackend } from "../openai/backend.js";
import { lineTokens, type TokenCounter } from "../pipeline/token-estimate.js";
import type { SyncAccounts } from "../tenancy/sync-accounts.js";
import { Gate } from "./lane-gate.js";
import { domainError, parse, refused, tierOf, withTier } from "./request.js";

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

  private async serve({ owner, endpoint, body, signal, stream, noCache }: SyncRequest): Promise<SyncAnswer> {
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
          backend
            .execute(request, signal, {
              lane,
              onText,
              onPrompt: stream && ((u) => stream.prompt(u)),
              reserve: !givenBack,
              cacheScope: this.deps.cacheScope?.(owner) ?? undefined,
              useCache: !noCache,
            })
            .catch((err) => {
              throw domainError(err);
            }),
        );
        this.metrics?.laneRequest(tier, spec.name, "completed");
        gate.served++;
        this.observe(tier, spec.name, started, first, result.usage.completionTokens);
        // Engine time as a batch line's: its share of the engine while it held a sequence; an upstream's is none.
        const held = backend.info.kind === "local" ? (performance.now() - admitted) / 1000 / Math.max(1, backend.info.concurrency) : 0;
        this.deps.accounts?.record({ owner, model: spec.name, endpoint, tier, usage: result.usage, seconds: held });
        return { body: withTier(endpoint, result.body, tier), tier, usage: result.usage };
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
