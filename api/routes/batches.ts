// /v1/batches: create (OpenAI's file form or the inline form), retrieve, list,
// cancel, and the results route.

import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import { BatchPlanSchema } from "../../domain/batch-plan.js";
import { BatchSchema, listOf } from "../../domain/objects.js";
import type { BatchService } from "../../domain/ports.js";
import type { Organization } from "../../domain/usage.js";
import { InlineBatchError, inlineToLines } from "../../pipeline/inline.js";
import { ApiError, badRequest, notFound } from "../errors.js";
import { ownBatchScope, ownerFrom, readScope } from "../http/auth.js";
import { unknownUrl } from "../http/error-handler.js";
import { sendJsonl, sendJsonlAsList } from "../http/jsonl-response.js";
import { listObject } from "../http/list.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import { parseId, parseRequest } from "../http/validate.js";
import {
  BATCH_ID_PATTERN,
  BatchIdParams,
  batchIdFrom,
  CreateBatchBody,
  InlineBatchRequest,
  isInlineBatchBody,
  ListBatchesQuery,
  OutputQuery,
  PauseManyBody,
  ResultsQuery,
  RetryBatchBody,
} from "../schemas/requests.js";
import type { DocContext, RouteModule } from "./route-module.js";

/** Builds the lines of an already validated inline body (the schema ran the same plan, so this rarely throws). */
function linesOf(inline: Parameters<typeof inlineToLines>[0]) {
  try {
    return inlineToLines(inline);
  } catch (err) {
    if (err instanceof InlineBatchError) throw badRequest(err.message, err.param);
    throw err;
  }
}

type RouterDeps = { organization?: Organization };

/** Paths beside the batch ids that take POST alone. */
const POST_ONLY = ["plan", "pause", "resume"] as const;

const batchId = (id: unknown) => parseId("batch", BATCH_ID_PATTERN, batchIdFrom(id));

export function batchesRouter(batches: BatchService, deps: RouterDeps = {}): Router {
  const router = Router();
  openAiRoutes(router, batches, deps);
  controlRoutes(router, batches, deps);
  outputRoutes(router, batches);
  return router;
}

/** OpenAI's routes: create (its file form, or our inline form), list, retrieve, cancel. */
function openAiRoutes(router: Router, batches: BatchService, deps: RouterDeps): void {
  router.post("/v1/batches", async (req, res) => {
    const owner = ownerFrom(res);
    if (isInlineBatchBody(req.body)) {
      const { completion_window, metadata, output_expires_after, ...inline } = parseRequest(InlineBatchRequest, req.body);
      const { endpoint, lines } = linesOf(inline);
      res.json(await batches.createInline({ endpoint, completion_window, metadata, output_expires_after, lines, owner }));
      return;
    }
    const body = parseRequest(CreateBatchBody, req.body ?? {});
    res.json(await batches.create({ ...body, owner }));
  });

  // Our extension: what a create of the same fields would ask and cost, with nothing queued or run.
  router.post("/v1/batches/plan", async (req, res) => {
    const body = parseRequest(CreateBatchBody, req.body ?? {});
    res.json(await batches.plan({ ...body, owner: ownerFrom(res) }));
  });

  router.get("/v1/batches", async (req, res) => {
    const { api_key_id, ...q } = parseRequest(ListBatchesQuery, req.query);
    res.json(listObject(await batches.list({ ...q, owner: readScope(res, api_key_id, deps.organization) })));
  });

  router.get("/v1/batches/:batch_id", async (req, res) => {
    // Our POST-only extensions under /v1/batches/ are no batch ids: a GET of one is told which method it takes.
    const action = POST_ONLY.find((a) => a === req.params.batch_id);
    if (action) throw unknownUrl("GET", `/v1/batches/${action}`, "it takes POST.");
    const id = batchId(req.params.batch_id);
    const batch = await batches.get(id, readScope(res, undefined, deps.organization));
    if (!batch) throw notFound("batch", id);
    res.json(batch);
  });

  router.post("/v1/batches/:batch_id/cancel", async (req, res) => {
    const id = batchId(req.params.batch_id);
    res.json(await batches.cancel(id, await ownBatchScope(batches, res, id, "cancel")));
  });
}

/** Our extensions that steer a batch: pause and resume (one batch, or many at once) and retry. */
function controlRoutes(router: Router, batches: BatchService, deps: RouterDeps): void {
  // Our extension: the owner (or an admin) holds a long batch and lets it go on where it stopped; or every batch
  // of a key or a model at once.
  for (const action of ["pause", "resume"] as const) {
    router.post(`/v1/batches/${action}`, async (req, res) => {
      const { api_key_id, model } = parseRequest(PauseManyBody, req.body ?? {});
      const owner = readScope(res, api_key_id, deps.organization, action);
      res.json(listObject({ data: await batches.pauseMany(action, { owner, model }), has_more: false }));
    });
    router.post(`/v1/batches/:batch_id/${action}`, async (req, res) => {
      const id = batchId(req.params.batch_id);
      res.json(await batches[action](id, readScope(res, undefined, deps.organization)));
    });
  }

  // Our extension: a new batch of a finished batch's failed lines.
  router.post("/v1/batches/:batch_id/retry", async (req, res) => {
    const id = batchId(req.params.batch_id);
    const filter = parseRequest(RetryBatchBody, req.body ?? {});
    res.json(await batches.retry(id, await ownBatchScope(batches, res, id, "retry"), filter));
  });
}

/** Our extensions that read a batch's results while it runs and after. */
function outputRoutes(router: Router, batches: BatchService): void {
  // Our extension: the output committed so far, from a line on, in the order the output file will have.
  router.get("/v1/batches/:batch_id/output", async (req, res) => {
    const id = batchId(req.params.batch_id);
    const q = parseRequest(OutputQuery, req.query);
    // An admin reads every key's batches, but their results stay their own key's (as /results and their files do).
    const read = await batches.output(id, await ownBatchScope(batches, res, id, "read the results of"), q);
    if (!read) throw notFound("batch", id);
    res.setHeader("x-output-committed", String(read.committed));
    res.setHeader("x-output-through", String(read.through));
    res.setHeader("x-batch-status", read.status);
    res.setHeader("cache-control", "no-store");
    await sendJsonl(res, read.lines);
  });

  router.get("/v1/batches/:batch_id/results", async (req, res) => {
    const id = batchId(req.params.batch_id);
    const owner = await ownBatchScope(batches, res, id, "read the results of");
    const { format } = parseRequest(ResultsQuery, req.query);
    const batch = await batches.get(id, owner);
    if (!batch) throw notFound("batch", id);
    const lines = await batches.results(id, owner);
    if (!lines) {
      throw new ApiError(404, `Batch '${id}' has no results yet (status: ${batch.status}).`, "invalid_request_error", "results_not_ready");
    }
    await (format === "jsonl" ? sendJsonl(res, lines) : sendJsonlAsList(res, lines));
  });
}

// --- OpenAPI ---

const BatchOutputLineSchema = z
  .object({
    id: z.string(),
    custom_id: z.string(),
    response: z.object({ status_code: z.number().int(), request_id: z.string(), body: z.record(z.string(), z.unknown()) }).nullable(),
    error: z.object({ code: z.string(), message: z.string() }).nullable(),
    cached: z.enum(["duplicate", "hit"]).optional().openapi({
      description:
        "Extension field, on a line answered without running: `duplicate` (another line of the batch computed it) or `hit` (the result cache held it).",
    }),
  })
  .openapi("BatchOutputLine", { description: "One line of a batch's output file, as OpenAI writes it." });

const ResultsListSchema = z.object({ object: z.literal("list"), data: z.array(BatchOutputLineSchema) }).openapi("BatchResults");

export function registerBatchesPaths(r: OpenAPIRegistry, ctx: DocContext): void {
  registerCreatePath(r, ctx);
  registerPlanPath(r);
  registerReadAndCancelPaths(r);
  registerPausePaths(r, ctx);
  registerRetryPath(r);
  registerOutputPaths(r);
}

function registerCreatePath(r: OpenAPIRegistry, ctx: DocContext): void {
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/batches",
      tags: ["Batches"],
      summary: "Create a batch",
      description:
        "OpenAI's form names an uploaded file (`input_file_id`). The inline form sends the prompts in the body " +
        "(`input: [{prompt}]`); it is recognised by an `input` array and no `input_file_id`, and becomes a /v1/completions batch.",
      request: {
        body: {
          required: true,
          content: {
            "application/json": {
              schema: z.union([CreateBatchBody, InlineBatchRequest]).openapi({ description: "OpenAI's file form or the inline form." }),
              // The inline form first: it is the one "Try it out" fills in, and it runs as it is (the file form needs an
              // uploaded file's id).
              examples: {
                inline: {
                  summary: "Inline form",
                  value: { model: ctx.model, input: [{ prompt: "Once upon a time" }, { prompt: "The cat" }], max_tokens: 50 },
                },
                file: {
                  summary: "OpenAI file form (upload the file first: POST /v1/files)",
                  value: { input_file_id: "file-3c9d1e2f4a5b6c7d8e9f0a1b", endpoint: "/v1/chat/completions", completion_window: "24h" },
                },
              },
            },
          },
        },
      },
      responses: { 200: jsonResponse(BatchSchema, "The batch, usually still `validating`."), ...errorResponses(400, 401, 404, 429, 503) },
    }),
  );
}

function registerPlanPath(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/batches/plan",
      tags: ["Batches"],
      summary: "Plan a batch before creating it",
      description:
        "Extension. The fields of a create (OpenAI's file form), refused as a create would refuse them (a file that would fail " +
        "validation is a 400 `invalid_input_file` naming its first fault; another key's file is a 404). Answers the lines, the " +
        "distinct requests, the lines the result cache answers, the prompt tokens by the model's tokenizer, the generation " +
        "bounds, the projected time behind the queue and the cost. Nothing is queued or run (docs/cache.md).",
      request: {
        body: {
          required: true,
          content: {
            "application/json": {
              schema: CreateBatchBody,
              example: { input_file_id: "file-3c9d1e2f4a5b6c7d8e9f0a1b", endpoint: "/v1/chat/completions", completion_window: "24h" },
            },
          },
        },
      },
      responses: { 200: jsonResponse(BatchPlanSchema, "The plan."), ...errorResponses(400, 401, 404, 503) },
    }),
  );
}

function registerReadAndCancelPaths(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/batches",
      tags: ["Batches"],
      summary: "List batches",
      request: { query: ListBatchesQuery },
      responses: { 200: jsonResponse(listOf(BatchSchema, "BatchList"), "A page of batches, newest first."), ...errorResponses(400, 401) },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/batches/{batch_id}",
      tags: ["Batches"],
      summary: "Retrieve a batch",
      request: { params: BatchIdParams },
      responses: { 200: jsonResponse(BatchSchema, "The batch."), ...errorResponses(401, 404) },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/batches/{batch_id}/cancel",
      tags: ["Batches"],
      summary: "Cancel a batch",
      description: "Queued batches end at once (`cancelled`); running ones pass through `cancelling` and keep the results they have.",
      request: { params: BatchIdParams },
      responses: { 200: jsonResponse(BatchSchema, "The batch, `cancelling` or `cancelled`."), ...errorResponses(401, 403, 404) },
    }),
  );
}

function registerPausePaths(r: OpenAPIRegistry, ctx: DocContext): void {
  for (const action of ["pause", "resume"] as const)
    r.registerPath(
      keyedRoute({
        method: "post",
        path: `/v1/batches/${action}`,
        tags: ["Batches"],
        summary: `${action === "pause" ? "Pause" : "Resume"} every batch of a key or a model (extension)`,
        description:
          `${action === "pause" ? "Pauses" : "Resumes"} every batch not ended of \`api_key_id\` (another key's: admin keys only) ` +
          "and of `model`, as the batch route does one: to free the engine for a deadline, say. Answers the batches it changed.",
        // The example runs as it is here (every batch of the served model); Swagger UI would otherwise send a key id "string".
        request: { body: { required: true, content: { "application/json": { schema: PauseManyBody, example: { model: ctx.model } } } } },
        responses: { 200: jsonResponse(listOf(BatchSchema, "BatchList"), "The batches changed."), ...errorResponses(400, 401, 403) },
      }),
    );
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/batches/{batch_id}/pause",
      tags: ["Batches"],
      summary: "Pause a batch (extension)",
      description:
        "The batch claims nothing more; its running shards finish the requests in flight, checkpoint and go back to the queue. " +
        "Its status stays (`in_progress` once it started) and `paused_at` is set; its completion window keeps running. " +
        "For the batch's key, or an admin key. Pausing a paused batch changes nothing; an ended or ending batch is 400 `batch_not_running`.",
      request: { params: BatchIdParams },
      responses: { 200: jsonResponse(BatchSchema, "The batch, with `paused_at`."), ...errorResponses(400, 401, 404) },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/batches/{batch_id}/resume",
      tags: ["Batches"],
      summary: "Resume a paused batch (extension)",
      description:
        "Clears `paused_at`: the batch's shards are claimed again and go on from their checkpoints, with nothing rerun. " +
        "Resuming a running batch changes nothing; an ended or ending batch is 400 `batch_not_running`.",
      request: { params: BatchIdParams },
      responses: { 200: jsonResponse(BatchSchema, "The batch, `paused_at` null."), ...errorResponses(400, 401, 404) },
    }),
  );
}

function registerRetryPath(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/batches/{batch_id}/retry",
      tags: ["Batches"],
      summary: "Retry a finished batch's failed lines (extension)",
      description:
        "Creates a new batch from the lines of a finished batch that failed, or that a cancel or an expiry left unrun, with " +
        "`metadata.retry_of` naming the original. Lines that succeeded are never rerun. `codes` keeps only lines with those error " +
        "codes; `include_cancelled` and `include_expired` (default true) take or leave the unrun lines. 400 `batch_not_finished` " +
        "while the batch runs, 400 `nothing_to_retry` when no line qualifies.",
      request: {
        params: BatchIdParams,
        body: { required: false, content: { "application/json": { schema: RetryBatchBody } } },
      },
      responses: {
        200: jsonResponse(BatchSchema, "The new batch, usually still `validating`."),
        ...errorResponses(400, 401, 403, 404, 429, 503),
      },
    }),
  );
}

function registerOutputPaths(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/batches/{batch_id}/output",
      tags: ["Batches"],
      summary: "Read a batch's output while it runs (extension)",
      description:
        "Not part of OpenAI's API. The output lines committed so far, from line `after` on, as JSONL: only lines kept durably, in the order the batch's output file will have, so a reader that asks again with `after` set to the lines it has never sees a line twice or misses one. Once the batch has ended, its output file's lines. The owner's key or an admin key.",
      request: { params: BatchIdParams, query: OutputQuery },
      responses: {
        200: {
          description:
            "Output lines. `x-output-through`: the line the answer ends after (the next read's `after`); `x-output-committed`: lines committed so far; `x-batch-status`: the batch's status as the read began (once it is final, no line follows).",
          content: { "application/jsonl": { schema: { type: "string" } } },
        },
        ...errorResponses(400, 401, 404),
      },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/batches/{batch_id}/results",
      tags: ["Inline form and status"],
      summary: "A batch's output lines (extension)",
      description: "Not part of OpenAI's API. 404 until the batch has results; while it runs, the lines finished so far.",
      request: { params: BatchIdParams, query: ResultsQuery },
      responses: {
        200: {
          description: "The output lines.",
          content: {
            "application/json": { schema: ResultsListSchema },
            "application/jsonl": { schema: { type: "string" } },
          },
        },
        ...errorResponses(400, 401, 403, 404),
      },
    }),
  );
}

export const batchesRoutes: RouteModule = {
  source: import.meta.url,
  router: (d) => batchesRouter(d.batches, d),
  paths: registerBatchesPaths,
};
