// Which models the live workers serve, as the distributed mode names batches by them: a batch for a model no live
// worker serves fails at once saying so (while none is live at all, batches wait, as a queue does), and an API server
// with no models of its own (neither MODEL_PATH nor MODELS_FILE) takes the workers' models, with their aliases,
// prices and defaults, as each announces them in its heartbeat row.
import type pino from "pino";
import { type ModelRegistry, registryOfCatalogues } from "../backends/registry.js";
import { noWorkerLive } from "../domain/errors.js";
import type { WorkerInfo, WorkerRegistry } from "../state/ports.js";

/** How long a create waits before it asks again while no worker is live (a worker loading its model takes a while). */
const NO_WORKER_RETRY_AFTER_SECONDS = 5;
/** How often an API server that follows its workers looks at them between creates (/v1/models, synchronous requests). */
const FOLLOW_MS = 2_000;

export interface ServedModelsDeps {
  /** This process's registry; with `followWorkers`, replaced in place by what the live workers serve. */
  registry: ModelRegistry;
  followWorkers: boolean;
  workers: Pick<WorkerRegistry, "live">;
  leaseSeconds: number;
  logger: pino.Logger;
}

export class ServedModels {
  private timer: NodeJS.Timeout | undefined;
  private said: string | undefined;

  constructor(private readonly deps: ServedModelsDeps) {}

  /** Follows the workers from now on (an API server with no models of its own); resolves after the first look. */
  async start(): Promise<void> {
    if (!this.deps.followWorkers) return;
    await this.look().catch(() => undefined);
    this.timer = setInterval(() => void this.look().catch(() => undefined), FOLLOW_MS);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
  }

  /**
   * The registry a batch is named by now: the models a live worker serves (a batch naming another fails, saying
   * which are served), or all of this process's while none is live (the batch waits for one). Following the workers
   * with none live, there is nothing to name a batch by: 503 no_worker_live.
   */
  async forBatch(): Promise<ModelRegistry> {
    const live = await this.look();
    if (live.length === 0) {
      if (this.deps.followWorkers) throw noWorkerLive(NO_WORKER_RETRY_AFTER_SECONDS);
      return this.deps.registry;
    }
    return this.deps.registry.servedBy(new Set(live.flatMap((w) => w.models)));
  }

  /** The live workers; following them, the registry is brought to what they serve (and a change is logged). */
  private async look(): Promise<WorkerInfo[]> {
    const live = await this.deps.workers.live(this.deps.leaseSeconds);
    if (!this.deps.followWorkers) return live;
    const registry = registryOfCatalogues(live.flatMap((w) => (w.catalogue ? [w.catalogue] : [])));
    this.deps.registry.replaceWith(registry);
    this.tell(registry);
    return live;
  }

  /** Says what the workers serve when it changes: an API server names batches by it, so an operator must see it. */
  private tell(registry: ModelRegistry): void {
    const { logger } = this.deps;
    const models = registry.models.map((m) => (m.aliases.length > 0 ? `${m.name} (also ${m.aliases.join(", ")})` : m.name));
    const text = models.join("; ") + (registry.fallback ? `; any other name goes to ${registry.fallback}` : "");
    if (text === this.said) return;
    const first = this.said === undefined;
    this.said = text;
    if (models.length > 0)
      logger.info({ models: registry.models.map((m) => m.name), fallback: registry.fallback ?? null }, `the live workers serve: ${text}`);
    // At start the workers are often still loading their models: normal, so said as information; losing them all is not.
    else
      logger[first ? "info" : "warn"](
        "no worker is live: batches are refused (503 no_worker_live) until one announces the models it serves",
      );
  }
}
