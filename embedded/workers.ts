// The live workers of this process (the pools the scheduler and /pools see), and the queue's counts.
import type { WorkerInfo, WorkerRegistry } from "../state/ports.js";
import type { MemoryState } from "./state.js";

export class MemoryWorkerRegistry implements WorkerRegistry {
  constructor(private readonly state: MemoryState) {}

  async register(w: Parameters<WorkerRegistry["register"]>[0]): Promise<void> {
    const known = this.state.workers.get(w.id);
    this.state.workers.set(w.id, {
      ...w,
      models: [...w.models],
      running: [...w.running],
      url: w.url ?? null,
      catalogue: w.catalogue ?? null,
      lastSeen: this.state.clock(),
      preemptedUntil: known?.preemptedUntil ?? 0,
      preemptions: known?.preemptions ?? 0,
    });
  }

  async preempted(id: string, cooldownSeconds: number): Promise<void> {
    const w = this.state.workers.get(id);
    if (!w) return;
    w.preemptedUntil = this.state.clock() + cooldownSeconds * 1000;
    w.preemptions++;
  }

  async unregister(id: string): Promise<void> {
    this.state.workers.delete(id);
  }

  async forget(olderThanSeconds: number): Promise<number> {
    const before = this.state.clock() - olderThanSeconds * 1000;
    let n = 0;
    for (const [id, w] of this.state.workers) if (w.lastSeen < before && this.state.workers.delete(id)) n++;
    return n;
  }

  async live(withinSeconds: number): Promise<WorkerInfo[]> {
    const now = this.state.clock();
    const inUse = this.state.runningByWorker();
    return this.state.liveWorkers(withinSeconds).map((w) => ({
      id: w.id,
      pool: w.pool,
      capacity: w.capacity,
      inUse: inUse.get(w.id) ?? 0,
      running: [...w.running],
      models: [...w.models],
      lastSeen: Math.floor(w.lastSeen / 1000),
      preempted: w.preemptedUntil > now,
      preemptedUntil: w.preemptedUntil > now ? Math.ceil(w.preemptedUntil / 1000) : null,
      preemptions: w.preemptions,
      url: w.url,
      catalogue: w.catalogue,
    }));
  }

  async queueCounts(): Promise<{ depth: number; running: number }> {
    let depth = 0;
    for (const e of this.state.batches.values()) if (e.batch.status === "validating" && !e.stopReason) depth++;
    return { depth, running: this.shards().filter((s) => s.state === "running").length };
  }

  private shards() {
    return [...this.state.batches.values()].flatMap((e) => e.shards);
  }
}
