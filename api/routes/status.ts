// The operational views: queue depth and the simulated GPU pools.

import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import type { BatchService, ControlPlaneStatus, Owner, PoolStatus, QueueStats } from "../../domain/ports.js";
import type { Organization } from "../../domain/usage.js";
import { adminOnly, readScope } from "../http/auth.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import type { RouteModule } from "./route-module.js";

/**
 * With keys on, a caller sees the ids of its own jobs only (an admin's scope, undefined, sees every key's); the counts
 * stay global, and how many jobs of other keys hold slots is said, so a busy pool never reads as idle.
 */
export async function poolsVisibleTo(
  status: ControlPlaneStatus,
  batches: BatchService,
  scope: Owner | undefined,
): Promise<Array<PoolStatus & { other_keys_jobs?: number }>> {
  const pools = await status.poolStatus();
  if (scope === null || scope === undefined) return pools;
  return Promise.all(
    pools.map(async (p) => {
      const jobs = await ownedBy(batches, scope, p.jobs);
      return { ...p, jobs, other_keys_jobs: p.jobs.length - jobs.length };
    }),
  );
}

async function ownedBy(batches: BatchService, owner: Owner, ids: string[]): Promise<string[]> {
  const owned = await Promise.all(ids.map(async (id) => (await batches.get(id, owner)) !== undefined));
  return ids.filter((_, i) => owned[i]);
}

export function statusRouter(deps: {
  status: ControlPlaneStatus;
  batches: BatchService;
  organization?: Pick<Organization, "ownerOf">;
}): Router {
  const { status, batches } = deps;
  const router = Router();

  router.get("/queue/stats", async (_req, res) => {
    res.json(await status.queueStats());
  });

  // The pools are a scheduling model, not real devices: say so in the payload itself.
  router.get("/pools", async (_req, res) => {
    res.json({ simulated: true, pools: await poolsVisibleTo(status, batches, readScope(res, undefined, deps.organization)) });
  });

  // Simulates the loss of the spot capacity (a cloud's spot reclaim): its batches checkpoint and resume elsewhere.
  // Every key's spot work stops, so it is an operator's control: an admin key's (anyone's where the API is open).
  router.post("/pools/spot/preempt", adminOnly("simulate a spot preemption (it stops every key's work on spot)"), async (_req, res) => {
    const scope = readScope(res, undefined, deps.organization);
    const { preempted, cooldown_seconds } = await status.preemptSpot();
    res.json({
      simulated: true,
      pool: "spot",
      preempted: scope === null || scope === undefined ? preempted : await ownedBy(batches, scope, preempted),
      cooldown_seconds,
      pools: await poolsVisibleTo(status, batches, scope),
    });
  });

  return router;
}

// --- OpenAPI ---

export const QueueStatsSchema = z
  .object({ depth: z.number().int(), max_depth: z.number().int(), running: z.number().int() })
  .openapi("QueueStats", { example: { depth: 3, max_depth: 100, running: 2 } }) satisfies z.ZodType<QueueStats>;

export const PoolStatusSchema = z
  .object({
    name: z.enum(["spot", "dedicated"]),
    capacity: z.number().int(),
    in_use: z.number().int(),
    available: z.number().int(),
    preempted: z.number().int().openapi({ description: "Slots taken away by a simulated preemption, back after the cooldown." }),
    preempted_until: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "Unix seconds when the preempted slots are all back; null while none is taken away." }),
    preemptions: z.number().int().openapi({ description: "Simulated preemptions since the service started." }),
    jobs: z
      .array(z.string())
      .openapi({ description: "Ids of the batches holding a slot (with keys on: the caller's own; an admin key's: every key's)." }),
    other_keys_jobs: z.number().int().optional().openapi({
      description: "With keys on, for a key that is not an admin: batches of other keys holding a slot (their ids are not shown).",
    }),
    workers: z
      .array(
        z.object({
          id: z.string(),
          capacity: z.number().int(),
          in_use: z.number().int(),
          last_seen: z.number().int().openapi({ description: "Unix seconds of its last heartbeat." }),
          preempted: z.boolean(),
        }),
      )
      .optional()
      .openapi({ description: "Distributed mode: the live workers registered in this pool (their capacity is the pool's)." }),
  })
  .openapi("PoolStatus") satisfies z.ZodType<PoolStatus>;

const PoolsSchema = z.object({ simulated: z.literal(true), pools: z.array(PoolStatusSchema) }).openapi("Pools", {
  description: "The simulated GPU pools the scheduler places jobs on. There are no real devices behind them.",
  example: {
    simulated: true,
    pools: [
      {
        name: "spot",
        capacity: 2,
        in_use: 1,
        available: 1,
        preempted: 0,
        preempted_until: null,
        preemptions: 0,
        jobs: ["batch_6a1f0c2e9b7d4e3f8a5b1c0d"],
      },
      { name: "dedicated", capacity: 1, in_use: 0, available: 1, preempted: 0, preempted_until: null, preemptions: 0, jobs: [] },
    ],
  },
});

export function registerStatusPaths(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/queue/stats",
      tags: ["Inline form and status"],
      summary: "Queue depth",
      responses: { 200: jsonResponse(QueueStatsSchema, "Jobs waiting, the bound, and jobs running."), ...errorResponses(401) },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/pools/spot/preempt",
      tags: ["Inline form and status"],
      summary: "Simulate a spot preemption: the spot batches checkpoint and resume on other capacity",
      description:
        "The spot pool's slots are gone for SPOT_PREEMPT_COOLDOWN_SECONDS. Its running batches stop as on a shutdown " +
        "(requests in flight get SHUTDOWN_GRACE_SECONDS to finish and are kept; nothing runs twice) and go back to the " +
        "queue first in line, to resume on dedicated capacity, or on spot once it is back. It stops every key's spot work: " +
        "with keys on, only an admin key may (403 `insufficient_permissions` otherwise).",
      responses: {
        200: jsonResponse(
          z
            .object({
              simulated: z.literal(true),
              pool: z.literal("spot"),
              preempted: z
                .array(z.string())
                .openapi({ description: "The batches that were running on spot (with keys on: the caller's own)." }),
              cooldown_seconds: z.number().int(),
              pools: z.array(PoolStatusSchema),
            })
            .openapi("Preemption"),
          "What was preempted, and the pools after it.",
        ),
        ...errorResponses(401, 403),
      },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/pools",
      tags: ["Inline form and status"],
      summary: "Simulated GPU pool status",
      responses: { 200: jsonResponse(PoolsSchema, "Each pool's capacity and the jobs in it."), ...errorResponses(401) },
    }),
  );
}

export const statusRoutes: RouteModule = {
  source: import.meta.url,
  router: (d) => statusRouter({ status: d.status, batches: d.batches, organization: d.organization }),
  paths: registerStatusPaths,
};
