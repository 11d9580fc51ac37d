// The backends of the registry's models, brought up when a batch needs them. Upstream backends are cheap and
// stay. Local models load on demand and unload after a while unused, within a memory budget: a model that does
// not fit waits until idle models are unloaded (least recently used first) or, when none can be, until one
// becomes idle. A model that fails to load fails the batches that asked for it (ModelLoadError), not the others;
// the next batch for it tries again. A LoRA adapter (a spec with a `parent`) is served by its base's backend: it
// holds the base as one more user while a batch uses it, and takes no memory of the budget beyond what the base's
// engine gives its adapters' contexts.
import type { InferenceBackend } from "../openai/backend.js";
import type { LocalBackendSpec, ModelRegistry, ModelSpec, UpstreamBackendSpec } from "./registry.js";

export type LocalSpec = ModelSpec & { backend: LocalBackendSpec };
export type UpstreamSpec = ModelSpec & { backend: UpstreamBackendSpec };

export interface BackendFactory {
  /** `signal` aborts when the router closes: the load stops, and what it brought up is closed. */
  local(spec: LocalSpec, signal: AbortSignal): Promise<InferenceBackend>;
  upstream(spec: UpstreamSpec): InferenceBackend;
  /** A LoRA adapter's backend, over its base's (`base`, loaded and held while the adapter is in use). */
  adapter?(spec: LocalSpec, base: InferenceBackend): InferenceBackend;
  /** Bytes a local model will take once loaded (engine/load/footprint.ts). */
  footprint(spec: LocalSpec): Promise<number>;
}

export class ModelLoadError extends Error {
  constructor(
    readonly model: string,
    cause: unknown,
  ) {
    super(`The model '${model}' could not be loaded: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = "ModelLoadError";
  }
}

export interface ModelLease {
  backend: InferenceBackend;
  /** Call once the batch stops using the backend. */
  release(): void;
}

type State = "unloaded" | "loading" | "loaded";

interface Entry {
  spec: ModelSpec;
  state: State;
  backend?: InferenceBackend;
  loading?: Promise<InferenceBackend>;
  users: number;
  bytes: number;
  lastUsed: number;
  idleTimer?: NodeJS.Timeout;
  /** An adapter's hold on its base while it is up. */
  baseLease?: ModelLease;
}

export interface ModelStatus {
  name: string;
  kind: "local" | "upstream";
  state: State;
  /** Batches using it now. */
  batches: number;
  /** Estimated bytes held (local models). */
  bytes: number;
}

export interface RouterOptions {
  registry: ModelRegistry;
  factory: BackendFactory;
  /** Local models loaded at once may take this many bytes together (estimated). */
  memoryBudgetBytes: number;
  /** A local model unused this long is unloaded (0: only when another needs the room). */
  idleUnloadMs: number;
  log: (msg: string, fields?: Record<string, unknown>) => void;
}

export class ModelRouter {
  private readonly entries = new Map<string, Entry>();
  private readonly roomWaiters = new Set<() => void>();
  private clock = 0;
  private closed = false;
  /** Aborted by close: loads in progress stop (a Ctrl-C or a shutdown during a load minutes long). */
  private readonly closing = new AbortController();

  constructor(private readonly opts: RouterOptions) {
    for (const spec of opts.registry.models) this.entries.set(spec.name, { spec, state: "unloaded", users: 0, bytes: 0, lastUsed: 0 });
  }

  get registry(): ModelRegistry {
    return this.opts.registry;
  }

  isLoaded(name: string): boolean {
    return this.entries.get(name)?.state === "loaded";
  }

  status(): ModelStatus[] {
    return [...this.entries.values()].map((e) => ({
      name: e.spec.name,
      kind: e.spec.backend.kind,
      state: e.state,
      batches: e.users,
      bytes: e.bytes,
    }));
  }

  /**
   * Tokens in `text` by the tokenizer of the model `name` resolves to, where that model is loaded in this process;
   * undefined elsewhere (an upstream, a model not loaded, an API server): the caller estimates instead.
   */
  countTokens(name: string, text: string): number | undefined {
    const entry = this.entries.get(this.registry.resolve(name || undefined)?.name ?? name);
    if (entry?.state !== "loaded" || !entry.backend?.countTokens) return undefined;
    try {
      return entry.backend.countTokens(text);
    } catch {
      return undefined;
    }
  }

  /** Backends up now (for metrics and /ready). */
  backends(): Array<{ name: string; backend: InferenceBackend }> {
    return [...this.entries.values()].filter((e) => e.backend).map((e) => ({ name: e.spec.name, backend: e.backend! }));
  }

  /** The backend of the registry model `name`, brought up if needed. Rejects with ModelLoadError or the signal's reason. */
  async acquire(name: string, signal?: AbortSignal): Promise<ModelLease> {
    const entry = this.entries.get(name);
    if (!entry) throw new ModelLoadError(name, new Error(`it is not in the model registry (${this.opts.registry.names.join(", ")})`));
    // Stopped already: no load is begun for no one.
    if (signal?.aborted) throw signal.reason;
    entry.users++;
    clearTimeout(entry.idleTimer);
    try {
      const backend = await untilAborted(this.bringUp(entry), signal);
      entry.lastUsed = ++this.clock;
      let released = false;
      return {
        backend,
        release: () => {
          if (released) return;
          released = true;
          this.release(entry);
        },
      };
    } catch (err) {
      this.release(entry);
      throw err;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.closing.abort(new Error("the service is shutting down"));
    for (const wake of this.roomWaiters) wake();
    // A load in progress stops (or ends) before the models are taken down, so none outlives the router.
    await Promise.allSettled([...this.entries.values()].map((e) => e.loading));
    await Promise.allSettled([...this.entries.values()].map((e) => this.unload(e)));
  }

  /** Shared by every batch waiting for the model, so no one batch's abort stops the load for the others. */
  private async bringUp(entry: Entry): Promise<InferenceBackend> {
    if (entry.backend) return entry.backend;
    if (entry.loading) return entry.loading;
    const { spec } = entry;
    if (spec.parent !== undefined) return this.bringUpAdapter(entry);
    if (spec.backend.kind === "upstream") {
      entry.backend = this.opts.factory.upstream(spec as UpstreamSpec);
      entry.state = "loaded";
      return entry.backend;
    }
    entry.loading = (async () => {
      entry.state = "loading";
      try {
        const bytes = await this.opts.factory.footprint(spec as LocalSpec);
        await this.makeRoom(entry, bytes);
        this.opts.log("loading model", { model: spec.name, estimated_mb: Math.round(bytes / 2 ** 20) });
        const backend = await this.opts.factory.local(spec as LocalSpec, this.closing.signal);
        if (this.closed) {
          await backend.close();
          throw new Error("the service is shutting down");
        }
        entry.backend = backend;
        entry.state = "loaded";
        return backend;
      } catch (err) {
        entry.state = "unloaded";
        entry.bytes = 0;
        this.wakeRoomWaiters();
        throw err instanceof ModelLoadError ? err : new ModelLoadError(spec.name, err);
      } finally {
        entry.loading = undefined;
      }
    })();
    return entry.loading;
  }

  private bringUpAdapter(entry: Entry): Promise<InferenceBackend> {
    const { spec } = entry;
    entry.loading = (async () => {
      entry.state = "loading";
      let lease: ModelLease | undefined;
      try {
        lease = await this.acquire(spec.parent!, this.closing.signal);
        if (!this.opts.factory.adapter) throw new Error("this service cannot serve adapters");
        entry.backend = this.opts.factory.adapter(spec as LocalSpec, lease.backend);
        entry.baseLease = lease;
        entry.state = "loaded";
        return entry.backend;
      } catch (err) {
        lease?.release();
        entry.state = "unloaded";
        throw new ModelLoadError(spec.name, err);
      } finally {
        entry.loading = undefined;
      }
    })();
    return entry.loading;
  }

  /** Unloads idle local models, least recently used first, until `bytes` more fit; else waits for one to go idle. */
  private async makeRoom(entry: Entry, bytes: number): Promise<void> {
    for (;;) {
      if (this.closed) throw new Error("the service is shutting down");
      // Adapters hold no memory of their own here (their base's engine bounds their contexts).
      const others = [...this.entries.values()].filter(
        (e) => e !== entry && e.spec.backend.kind === "local" && e.spec.parent === undefined,
      );
      const used = others.reduce((s, e) => s + e.bytes, 0);
      // The room is taken in the same turn as the check, so two loads cannot both count on it.
      if (used + bytes <= this.opts.memoryBudgetBytes) {
        entry.bytes = bytes;
        return;
      }
      const idle = others.filter((e) => e.state === "loaded" && e.users === 0).sort((a, b) => a.lastUsed - b.lastUsed);
      if (idle.length > 0) {
        this.opts.log("unloading an idle model to make room", { model: idle[0].spec.name, for: entry.spec.name });
        await this.unload(idle[0]);
        continue;
      }
      // Nothing else loaded or loading: the model runs alone even if the estimate says it is too big.
      if (others.every((e) => e.state === "unloaded")) {
        this.opts.log("model's estimated memory exceeds the budget; it runs alone", {
          model: entry.spec.name,
          estimated_mb: Math.round(bytes / 2 ** 20),
          budget_mb: Math.round(this.opts.memoryBudgetBytes / 2 ** 20),
        });
        entry.bytes = bytes;
        return;
      }
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.roomWaiters.delete(wake);
          resolve();
        };
        this.roomWaiters.add(wake);
      });
    }
  }

  private release(entry: Entry) {
    entry.users = Math.max(0, entry.users - 1);
    if (entry.users > 0 || entry.spec.backend.kind !== "local") return;
    // An adapter's view costs nothing to make again: it lets its base go at once, which then idles as a base does.
    if (entry.baseLease) return void this.unload(entry);
    this.wakeRoomWaiters();
    if (this.opts.idleUnloadMs > 0 && entry.state === "loaded") {
      entry.idleTimer = setTimeout(() => {
        if (entry.users === 0) void this.unload(entry).then(() => this.wakeRoomWaiters());
      }, this.opts.idleUnloadMs);
      entry.idleTimer.unref();
    }
  }

  private wakeRoomWaiters() {
    for (const wake of [...this.roomWaiters]) wake();
  }

  private async unload(entry: Entry): Promise<void> {
    clearTimeout(entry.idleTimer);
    const backend = entry.backend;
    if (!backend) return;
    entry.backend = undefined;
    entry.state = "unloaded";
    entry.bytes = 0;
    const lease = entry.baseLease;
    entry.baseLease = undefined;
    if (lease) {
      await backend.close();
      return lease.release();
    }
    if (entry.spec.backend.kind === "local") this.opts.log("model unloaded", { model: entry.spec.name });
    await backend.close();
  }
}

/** `work`, or the signal's reason as soon as it aborts (the work itself goes on for whoever else awaits it). */
function untilAborted<T>(work: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    // Handled here whatever comes first, so a load that fails after the caller left is never an unhandled rejection.
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
    if (signal.aborted) onAbort();
  });
}
