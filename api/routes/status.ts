// The proof of concept's operational views: queue depth and the simulated GPU pools.
import { Router } from "express";
import type { BatchService, ControlPlaneStatus, Owner, PoolStatus } from "../../domain/ports.js";
import { ownerFrom } from "../http/auth.js";

/** With keys on, a caller sees the ids of its own jobs only; the counts stay global. */
export async function poolsVisibleTo(status: ControlPlaneStatus, batches: BatchService, owner: Owner): Promise<PoolStatus[]> {
  const pools = await status.poolStatus();
  if (owner === null) return pools;
  return Promise.all(pools.map(async (p) => ({ ...p, jobs: await ownedBy(batches, owner, p.jobs) })));
}

async function ownedBy(batches: BatchService, owner: Owner, ids: string[]): Promise<string[]> {
  const owned = await Promise.all(ids.map(async (id) => (await batches.get(id, owner)) !== undefined));
  return ids.filter((_, i) => owned[i]);
}

export function statusRouter(deps: { status: ControlPlaneStatus; batches: BatchService }): Router {
  const { status, batches } = deps;
  const router = Router();

  router.get("/queue/stats", async (_req, res) => {
    res.json(await status.queueStats());
  });

  // The pools are a scheduling model, not real devices: say so in the payload itself.
  router.get("/pools", async (_req, res) => {
    res.json({ simulated: true, pools: await poolsVisibleTo(status, batches, ownerFrom(res)) });
  });

  // Simulates the loss of the spot capacity (a cloud's spot reclaim): its batches checkpoint and resume elsewhere.
  router.post("/pools/spot/preempt", async (_req, res) => {
    const owner = ownerFrom(res);
    const { preempted, cooldown_seconds } = await status.preemptSpot();
    res.json({
      simulated: true,
      pool: "spot",
      preempted: owner === null ? preempted : await ownedBy(batches, owner, preempted),
      cooldown_seconds,
      pools: await poolsVisibleTo(status, batches, owner),
    });
  });

  return router;
}
