// /queue/stats and /pools from the state, in either mode: the pools are the workers registered in each (their
// capacities summed; one process's are the simulated pools), the queue the batches with shards waiting.
import type { ControlPlaneStatus, PoolStatus, QueueStats } from "../domain/ports.js";
import type { EventBus, WorkerRegistry } from "../state/ports.js";

export class ClusterStatus implements ControlPlaneStatus {
  constructor(
    private readonly deps: {
      workers: WorkerRegistry;
      events: EventBus;
      maxQueueDepth: number;
      leaseSeconds: number;
      preemptCooldownSeconds: number;
      /** Each pool lists its workers (false where the workers are the simulated pools themselves). */
      listWorkers?: boolean;
    },
  ) {}

  async queueStats(): Promise<QueueStats> {
    const { depth, running } = await this.deps.workers.queueCounts();
    return { depth, max_depth: this.deps.maxQueueDepth, running };
  }

  async poolStatus(): Promise<PoolStatus[]> {
    const workers = await this.deps.workers.live(this.deps.leaseSeconds);
    return (["spot", "dedicated"] as const).map((name) => {
      // As the embedded pools count: capacity is every live worker's, a reclaimed worker's slots are `preempted`
      // (back after the cooldown), and what is neither running nor reclaimed is available.
      const ws = workers.filter((w) => w.pool === name);
      const capacity = ws.reduce((n, w) => n + w.capacity, 0);
      const inUse = ws.reduce((n, w) => n + w.inUse, 0);
      const reclaimed = ws.filter((w) => w.preempted);
      const preempted = reclaimed.reduce((n, w) => n + w.capacity, 0);
      const back = reclaimed.flatMap((w) => (w.preemptedUntil === null ? [] : [w.preemptedUntil]));
      return {
        name,
        capacity,
        in_use: inUse,
        available: Math.max(0, capacity - preempted - inUse),
        preempted,
        // The last reclaimed worker's return: the pool is whole again then.
        preempted_until: back.length ? Math.max(...back) : null,
        preemptions: ws.reduce((n, w) => n + w.preemptions, 0),
        jobs: [...new Set(ws.flatMap((w) => w.running))],
        ...(this.deps.listWorkers === false
          ? {}
          : {
              workers: ws.map((w) => ({ id: w.id, capacity: w.capacity, in_use: w.inUse, last_seen: w.lastSeen, preempted: w.preempted })),
            }),
      };
    });
  }

  /** Announces the reclaim to the spot workers: each checkpoints its shards and hands them back. */
  async preemptSpot(): Promise<{ preempted: string[]; cooldown_seconds: number }> {
    const spot = (await this.poolStatus()).find((p) => p.name === "spot");
    await this.deps.events.publish({ type: "preempt", pool: "spot", cooldown_seconds: this.deps.preemptCooldownSeconds });
    return { preempted: spot?.jobs ?? [], cooldown_seconds: this.deps.preemptCooldownSeconds };
  }
}
