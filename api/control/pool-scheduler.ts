// The GPU pool scheduler. This is a SIMULATION by design, ported from the proof of concept's mock:
// "spot" and "dedicated" are capacity counters, not machines. It decides how many batch jobs run at
// once and records which pool each job was billed to; it never touches the engine — every running
// job shares the one real engine in this process.
import type pino from "pino";
import type { PoolStatus } from "../contracts.js";
import type { PoolName } from "../schemas/objects.js";

export interface Lease {
  readonly jobId: string;
  /** null: the job runs outside the simulated pools (on an upstream cluster). */
  readonly pool: PoolName | null;
  /** The job got its second-choice pool. */
  readonly fallback: boolean;
}

interface Pool {
  capacity: number;
  jobs: Set<string>;
  /** Slots lost to a simulated preemption until their cooldown ends, and preemptions so far. */
  lost: number;
  preemptions: number;
}

export interface PoolCapacities {
  spot: { capacity: number };
  dedicated: { capacity: number };
}

export class PoolScheduler {
  private readonly pools: Record<PoolName, Pool>;
  private readonly held = new Set<Lease>();
  private readonly releaseListeners: Array<() => void> = [];

  constructor(
    capacities: PoolCapacities,
    private readonly logger: pino.Logger,
  ) {
    this.pools = {
      spot: { capacity: capacities.spot.capacity, jobs: new Set(), lost: 0, preemptions: 0 },
      dedicated: { capacity: capacities.dedicated.capacity, jobs: new Set(), lost: 0, preemptions: 0 },
    };
  }

  get totalCapacity(): number {
    return this.pools.spot.capacity + this.pools.dedicated.capacity;
  }

  get inUse(): number {
    return this.held.size;
  }

  /**
   * A slot for `jobId`, or undefined when both pools are full (the caller waits for a release).
   * Spot is cheaper so it goes first; an urgent job prefers dedicated, which is never preempted.
   */
  tryAcquire(jobId: string, opts: { urgent: boolean }): Lease | undefined {
    const order: PoolName[] = opts.urgent ? ["dedicated", "spot"] : ["spot", "dedicated"];
    for (const [i, name] of order.entries()) {
      const pool = this.pools[name];
      if (pool.jobs.size >= pool.capacity - pool.lost) continue;
      pool.jobs.add(jobId);
      const lease: Lease = { jobId, pool: name, fallback: i > 0 };
      this.held.add(lease);
      const fields = { batch_id: jobId, pool: name, urgent: opts.urgent, in_use: pool.jobs.size, capacity: pool.capacity };
      if (lease.fallback) this.logger.info(fields, `${order[0]} pool full: batch falls back to the ${name} pool`);
      else this.logger.info(fields, `batch assigned to the ${name} pool`);
      return lease;
    }
    return undefined;
  }

  /** Frees the slot; releasing a lease twice is harmless (every way a job ends calls it). */
  release(lease: Lease): void {
    if (lease.pool === null || !this.held.delete(lease)) return;
    const pool = this.pools[lease.pool];
    pool.jobs.delete(lease.jobId);
    this.logger.debug({ batch_id: lease.jobId, pool: lease.pool, in_use: pool.jobs.size, capacity: pool.capacity }, "pool slot released");
    for (const listener of this.releaseListeners) listener();
  }

  /** `slots` of the pool are gone for `cooldownMs` (a simulated preemption); new jobs are placed around them. */
  lose(name: PoolName, slots: number, cooldownMs: number): void {
    const pool = this.pools[name];
    pool.preemptions++;
    const lost = Math.min(slots, pool.capacity - pool.lost);
    if (lost <= 0) return;
    pool.lost += lost;
    this.logger.warn(
      { pool: name, slots: lost, cooldown_ms: cooldownMs },
      `${name} capacity preempted: its slots are back after the cooldown`,
    );
    const timer = setTimeout(() => {
      pool.lost -= lost;
      this.logger.info({ pool: name, slots: lost }, `${name} capacity is back after its preemption`);
      for (const listener of this.releaseListeners) listener();
    }, cooldownMs);
    timer.unref();
  }

  onRelease(listener: () => void): void {
    this.releaseListeners.push(listener);
  }

  status(): PoolStatus[] {
    return (["spot", "dedicated"] as const).map((name) => {
      const p = this.pools[name];
      return {
        name,
        capacity: p.capacity,
        in_use: p.jobs.size,
        available: Math.max(0, p.capacity - p.lost - p.jobs.size),
        preempted: p.lost,
        preemptions: p.preemptions,
        jobs: [...p.jobs],
      };
    });
  }
}
