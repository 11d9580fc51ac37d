// What admin keys read of the whole deployment, in OpenAI's organization shapes: usage of completions and
// embeddings and costs, bucketed and grouped per key (domain/usage.ts), and the keys with their limits and what each
// has enqueued. A key that is not an admin's gets 403; where the API is open (no keys) everyone may read them.
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import { type Organization, USAGE_GROUPS, USAGE_PARAMS, type UsageKind, type UsageParam } from "../../domain/usage.js";
import { notFound } from "../errors.js";
import { requireAdmin } from "../http/auth.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import type { RouteModule } from "./route-module.js";

const USAGE: Record<string, UsageKind> = {
  "/v1/organization/usage/completions": "completions",
  "/v1/organization/usage/embeddings": "embeddings",
  "/v1/organization/costs": "costs",
};

export function organizationRouter(org: Organization): Router {
  const router = Router();
  router.use("/v1/organization", requireAdmin);
  for (const [path, kind] of Object.entries(USAGE)) {
    router.get(path, async (req, res) => {
      res.json(await org.usage(kind, req.query as Record<string, unknown>));
    });
  }
  router.get("/v1/organization/api_keys", async (_req, res) => {
    const data = await org.keys();
    res.json({ object: "list", data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: false });
  });
  router.get("/v1/organization/api_keys/:key_id", async (req, res) => {
    const key = (await org.keys()).find((k) => k.id === req.params.key_id);
    if (!key) throw notFound("api key", req.params.key_id, "key_id");
    res.json(key);
  });
  return router;
}

// --- OpenAPI ---

const nullable = z.string().nullable();
const bucket = (result: z.ZodType, name: string) =>
  z
    .object({
      object: z.literal("page"),
      data: z.array(
        z.object({ object: z.literal("bucket"), start_time: z.number().int(), end_time: z.number().int(), results: z.array(result) }),
      ),
      has_more: z.boolean(),
      next_page: z.string().nullable(),
    })
    .openapi(name);

const Completions = z.object({
  object: z.literal("organization.usage.completions.result"),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  input_cached_tokens: z.number().int(),
  input_audio_tokens: z.number().int(),
  output_audio_tokens: z.number().int(),
  num_model_requests: z.number().int(),
  project_id: nullable,
  user_id: nullable,
  api_key_id: nullable,
  model: nullable,
  batch: z.boolean().nullable(),
  service_tier: nullable,
});
const Embeddings = z.object({
  object: z.literal("organization.usage.embeddings.result"),
  input_tokens: z.number().int(),
  num_model_requests: z.number().int(),
  project_id: nullable,
  user_id: nullable,
  api_key_id: nullable,
  model: nullable,
});
const Costs = z.object({
  object: z.literal("organization.costs.result"),
  amount: z.object({ value: z.number(), currency: z.string() }),
  line_item: nullable,
  project_id: nullable,
  api_key_id: nullable,
});
const KeySchema = z
  .object({
    object: z.literal("organization.api_key"),
    id: z.string(),
    admin: z.boolean(),
    weight: z.number(),
    enqueued_token_limits: z.record(z.string(), z.number().int()),
    enqueued_tokens: z.record(z.string(), z.number().int()),
  })
  .openapi("ApiKey");

const USAGE_NOTE =
  "A batch's usage is counted in the bucket where the batch ended. Admin keys only. Every query parameter is listed; " +
  "any other is refused with a 400 naming it.";

const DAY = 86_400;

/**
 * Each usage parameter as the route reads it (domain/usage.ts parses the query; USAGE_PARAMS says which each kind
 * takes, so what is documented is what is taken). `since`: the examples' start, a week before the document was built,
 * so Swagger UI's Try it out answers a page of recent buckets as it is.
 */
function usageParam(name: UsageParam, kind: UsageKind, since: number): z.ZodType {
  const list = (description: string) => z.string().optional().openapi({ description });
  const params: Record<UsageParam, () => z.ZodType> = {
    start_time: () =>
      z
        .number()
        .int()
        .min(0)
        .openapi({
          description: "Start of the range, unix seconds (inclusive). Required.",
          example: since,
          param: { example: since },
        }),
    end_time: () => z.number().int().min(0).optional().openapi({ description: "End of the range, unix seconds (exclusive; default now)." }),
    bucket_width: () => z.enum(["1m", "1h", "1d"]).optional().openapi({ description: "Width of each time bucket (default `1d`)." }),
    group_by: () => list(`Group each bucket's results by ${USAGE_GROUPS[kind].join(", ")} (comma-separated or repeated).`),
    models: () => list("Only these models (comma-separated or repeated)."),
    api_key_ids: () => list("Only these keys' usage (comma-separated or repeated)."),
    batch: () =>
      z.enum(["true", "false"]).optional().openapi({ description: "Only batch (`true`) or only synchronous (`false`) requests." }),
    limit: () =>
      z.number().int().min(1).optional().openapi({ description: "Buckets per page (default and maximum depend on `bucket_width`)." }),
    page: () => z.string().optional().openapi({ description: "The previous page's `next_page`." }),
  };
  return params[name]();
}

export function usageQuery(kind: UsageKind, since: number) {
  return z.object(Object.fromEntries(USAGE_PARAMS[kind].map((name) => [name, usageParam(name, kind, since)])));
}

function registerOrganizationPaths(r: OpenAPIRegistry): void {
  const since = Math.floor(Date.now() / 1000 / DAY) * DAY - 7 * DAY;
  const docs: Array<[string, string, z.ZodType]> = [
    ["/v1/organization/usage/completions", "Completions usage per key, model or batch", bucket(Completions, "CompletionsUsagePage")],
    ["/v1/organization/usage/embeddings", "Embeddings usage per key or model", bucket(Embeddings, "EmbeddingsUsagePage")],
    ["/v1/organization/costs", "Costs at the models' prices, per key or model (line_item)", bucket(Costs, "CostsPage")],
  ];
  for (const [path, summary, schema] of docs)
    r.registerPath(
      keyedRoute({
        method: "get",
        path,
        tags: ["Organization"],
        summary,
        description: USAGE_NOTE,
        request: { query: usageQuery(USAGE[path], since) },
        responses: { 200: jsonResponse(schema, "A page of time buckets."), ...errorResponses(400, 401, 403) },
      }),
    );
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/organization/api_keys",
      tags: ["Organization"],
      summary: "The keys: id, admin flag, share weight, enqueued-token limits and what each has enqueued now (extension)",
      responses: {
        200: jsonResponse(z.object({ object: z.literal("list"), data: z.array(KeySchema), has_more: z.boolean() }), "Every key."),
        ...errorResponses(401, 403),
      },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/organization/api_keys/{key_id}",
      tags: ["Organization"],
      summary: "One key (extension)",
      request: { params: z.object({ key_id: z.string() }) },
      responses: { 200: jsonResponse(KeySchema, "The key."), ...errorResponses(401, 403, 404) },
    }),
  );
}

export const organizationRoutes: RouteModule = {
  source: import.meta.url,
  router: (d) => (d.organization ? organizationRouter(d.organization) : undefined),
  paths: registerOrganizationPaths,
};
