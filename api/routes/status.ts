// The proof of concept's operational views: queue depth and the simulated GPU pools.
import { Router } from "express";
import type { BatchService, ControlPlaneStatus, Owner, PoolStatus } from "../contracts.js";
import { ownerFrom } from "../http/auth.js";

/** With keys on, a caller sees the ids of its own jobs only; the counts stay global. */
export function poolsVisibleTo(status: ControlPlaneStatus, batches: BatchService, owner: Owner): PoolStatus[] {
  return status.poolStatus().map((p) => (owner === null ? p : { ...p, jobs: p.jobs.filter((id) => batches.get(id, owner)) }));
}

export function statusRouter(deps: { status: ControlPlaneStatus; batches: BatchService }): Router {
  const { status, batches } = deps;
  const router = Router();

  router.get("/queue/stats", (_req, res) => {
    res.json(status.queueStats());
  });

  // The pools are a scheduling model, not real devices: say so in the payload itself.
  router.get("/pools", (_req, res) => {
    res.json({ simulated: true, pools: poolsVisibleTo(status, batches, ownerFrom(res)) });
  });

  // Simulates the loss of the spot capacity (a cloud's spot reclaim): its batches checkpoint and resume elsewhere.
  router.post("/pools/spot/preempt", (_req, res) => {
    const owner = ownerFrom(res);
    const { preempted, cooldown_seconds } = status.preemptSpot();
    res.json({
      simulated: true,
      pool: "spot",
      preempted: owner === null ? preempted : preempted.filter((id) => batches.get(id, owner)),
      cooldown_seconds,
      pools: poolsVisibleTo(status, batches, owner),
    });
  });

  return router;
}
