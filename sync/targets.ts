// The `SyncTargets` port: an API server's view of the workers that answer synchronous requests. Each worker names
// its URL and models in its heartbeat row (WorkerRegistry); a request goes to a live one that serves its model,
// the one with the fewest requests this API server has sent it and not seen end, then the least busy with batch
// shards. A worker not heard from within a lease is not chosen, and a request running on one that stops being
// heard from is given up (watch).
import type { ModelRegistry } from "../backends/registry.js";
import { ModelNotFoundError, UnavailableError } from "../domain/errors.js";
import type { SyncTarget, SyncTargets } from "../domain/sync-inference.js";
import type { WorkerRegistry } from "../state/ports.js";

/** How long a request waits before it is refused when no worker serves its model: workers come back within a lease. */
const NO_WORKER_RETRY_AFTER_SECONDS = 5;

export class WorkerTargets implements SyncTargets {
  private readonly sent = new Map<string, number>();

  constructor(private readonly deps: { registry: ModelRegistry; workers: Pick<WorkerRegistry, "live">; leaseSeconds: number }) {}

  async pick(model: unknown): Promise<SyncTarget[]> {
    const spec = this.deps.registry.resolve(typeof model === "string" ? model : undefined);
    if (!spec) throw new ModelNotFoundError(String(model), this.deps.registry.names);
    const live = (await this.deps.workers.live(this.deps.leaseSeconds)).filter(
      (w): w is typeof w & { url: string } => w.url !== null && !w.preempted && w.models.includes(spec.name),
    );
    if (live.length === 0)
      throw new UnavailableError(
        `No worker serving '${spec.name}' is up to answer synchronous requests; retry shortly, or submit the work as a batch.`,
        "backend_unavailable",
        NO_WORKER_RETRY_AFTER_SECONDS,
      );
    const load = (w: { url: string; inUse: number; capacity: number }) => [this.sent.get(w.url) ?? 0, w.inUse / Math.max(1, w.capacity)];
    live.sort((a, b) => {
      const [x, y] = [load(a), load(b)];
      return x[0] - y[0] || x[1] - y[1];
    });
    return live.map((w) => this.target(w.url));
  }

  watch(url: string, onLost: () => void): () => void {
    const timer = setInterval(
      async () => {
        const live = await this.deps.workers.live(this.deps.leaseSeconds).catch(() => undefined);
        // A database that does not answer says nothing about the worker: the next look decides.
        if (live && !live.some((w) => w.url === url)) {
          clearInterval(timer);
          onLost();
        }
      },
      (this.deps.leaseSeconds * 1000) / 2,
    );
    timer.unref();
    return () => clearInterval(timer);
  }

  /** The worker at `url`; a request sent there counts in its load until it ends. */
  private target(url: string): SyncTarget {
    return {
      url,
      sending: () => {
        this.sent.set(url, (this.sent.get(url) ?? 0) + 1);
        let ended = false;
        return () => {
          if (ended) return;
          ended = true;
          const left = (this.sent.get(url) ?? 1) - 1;
          if (left > 0) this.sent.set(url, left);
          else this.sent.delete(url);
        };
      },
    };
  }
}
