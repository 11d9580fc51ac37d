// Anthropic's Message Batches API (/v1/messages/batches) over the same batches: a create writes each request
// as a /v1/messages line of an inline batch (anthropic/messages.ts serves it over chat), so the queue, the pools,
// the checkpoints and the exactly-once guarantees are the OpenAI batches'. Reads show the batch in Anthropic's
// shapes; errors on these routes are Anthropic's envelope (api/http/error-handler.ts).

import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { type Request, type Response, Router } from "express";
import { z } from "zod";
import { isFinal } from "../../domain/batch-state.js";
import type { Batch } from "../../domain/objects.js";
import type { BatchService, BatchViews, FileStore, Owner } from "../../domain/ports.js";
import type { Organization } from "../../domain/usage.js";
import { readCompleteJsonLines } from "../../pipeline/jsonl.js";
import { ANTHROPIC_PREFIX, AnthropicPageQuery, anthropicError, type RequestCounts, toMessageBatch, toResultLine } from "../anthropic.js";
import { ApiError, badRequest } from "../errors.js";
import { ownBatchScope, ownerFrom, readScope } from "../http/auth.js";
import { sendJsonl } from "../http/jsonl-response.js";
import { jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import { parseId, parseRequest } from "../http/validate.js";
import { BATCH_ID_PATTERN, BatchIdParams, batchIdFrom, messageBatchId } from "../schemas/requests.js";
import { syncExample } from "../schemas/sync-bodies.js";
import type { DocContext, RouteModule } from "./route-module.js";

const ENDPOINT = "/v1/messages" as const;
/** Anthropic's bounds: a batch holds at most 100,000 requests; a custom_id is 1-64 letters, digits, - and _. */
const MAX_REQUESTS = 100_000;
/** Ended batches whose cancelled/expired counts were read from their error file (they never change). */
const COUNTS_CACHE = 1_000;

const CreateMessageBatchBody = z
  .strictObject({
    requests: z
      .array(
        z.strictObject({
          custom_id: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, "custom_id must be 1-64 letters, digits, underscores or dashes"),
          params: z.record(z.string(), z.unknown()).openapi({
            description:
              "An Anthropic Messages request (`model`, `max_tokens`, `messages`...), as POST /v1/messages takes it " +
              "(`CreateMessageRequest`); checked as a line of the batch, so a wrong one is that request's own error.",
          }),
        }),
      )
      .min(1, "requests must hold at least one request")
      .max(MAX_REQUESTS, `requests may hold at most ${MAX_REQUESTS} requests`),
  })
  .superRefine((b, ctx) => {
    const seen = new Set<string>();
    // A request with no model name (or not a string) is that request's own error, as Anthropic has it; requests
    // may name different models, each run on its own.
    for (const [i, r] of b.requests.entries()) {
      if (seen.has(r.custom_id))
        ctx.addIssue({ code: "custom", path: ["requests", i, "custom_id"], message: `custom_id '${r.custom_id}' is used twice` });
      seen.add(r.custom_id);
    }
  })
  .openapi("CreateMessageBatch");

interface MessageBatchDeps {
  batches: BatchService;
  views: BatchViews;
  files: FileStore;
  /** Admin keys read every key's message batches, as they read every key's batches (teams.md). */
  organization?: Pick<Organization, "ownerOf">;
}

/** Message batches as Anthropic shows them, read from the batches they are: found, counted, paged, their results. */
class MessageBatchReads {
  /** Ended batches' tallies (they never change). */
  private readonly ended = new Map<string, Omit<RequestCounts, "processing">>();

  constructor(private readonly deps: MessageBatchDeps) {}

  /** Whose batches a read covers: the key's own, or an admin's every key's (undefined). */
  scopeOf(res: Response) {
    return readScope(res, undefined, this.deps.organization);
  }

  /** Only /v1/messages batches are message batches; another batch's id is not found here. */
  async find(id: unknown, owner: Owner | undefined): Promise<Batch> {
    const batchId = parseId("batch", BATCH_ID_PATTERN, batchIdFrom(id));
    const batch = await this.deps.batches.get(batchId, owner);
    if (!batch || batch.endpoint !== ENDPOINT)
      throw new ApiError(404, `No message batch found with id '${messageBatchId(batchId)}'.`, "not_found_error");
    return batch;
  }

  /** A message batch the caller may change or read the results of: its own key's (an admin's of another: 403). */
  async own(res: Response, id: unknown, action: string) {
    const batch = await this.find(id, this.scopeOf(res));
    return { batch, owner: await ownBatchScope(this.deps.batches, res, batch.id, action) };
  }

  /** A deleted batch's tallies go with it. */
  forget(id: string) {
    this.ended.delete(id);
  }

  /** Anthropic's tallies once a batch has ended: what a cancel or an expiry left unrun is told apart from errors. */
  private async countsOf(b: Batch, owner: Owner | undefined) {
    if (!isFinal(b.status)) return null;
    const cached = this.ended.get(b.id);
    if (cached) return cached;
    const { completed = 0, failed = 0 } = b.request_counts ?? {};
    const counts = { succeeded: completed, errored: failed, canceled: 0, expired: 0 };
    // A file that failed validation ran nothing (and counted nothing): every request is errored.
    if (b.errors?.data.length) {
      counts.errored = 0;
      for await (const _ of this.validationFailures(b, owner)) counts.errored++;
    } else if (failed > 0 && (b.status === "cancelled" || b.status === "expired")) {
      const unrun = b.status === "cancelled" ? "canceled" : "expired";
      for await (const line of this.resultLines([b.error_file_id], owner)) if (line.result.type === unrun) counts[unrun]++;
      counts.errored -= counts[unrun];
    }
    if (this.ended.size >= COUNTS_CACHE) this.ended.delete(this.ended.keys().next().value!);
    this.ended.set(b.id, counts);
    return counts;
  }

  /** The lines of these result files (output, error) as Anthropic's result lines. */
  private async *resultLines(ids: Array<string | null>, owner: Owner | undefined) {
    for (const id of ids) {
      const file = id ? await this.deps.files.open(id, owner) : undefined;
      if (file) for await (const text of readCompleteJsonLines(file.content)) yield toResultLine(JSON.parse(text));
    }
  }

  /** A file that failed validation: each request errored with its line's reason (or the file's). */
  private async *validationFailures(b: Batch, owner: Owner | undefined) {
    const byLine = new Map((b.errors?.data ?? []).map((e) => [e.line ?? 0, e.message ?? "Invalid request."]));
    const first = b.errors?.data[0]?.message ?? "The batch failed validation.";
    // Over its key's enqueued-token limit: a rate limit, as Anthropic's types say it, not a bad request.
    const status = b.errors?.data[0]?.code === "token_limit_exceeded" ? 429 : 400;
    const input = await this.deps.files.open(b.input_file_id, owner);
    if (!input) return;
    let n = 0;
    for await (const text of readCompleteJsonLines(input.content)) {
      n++;
      const custom_id = String((JSON.parse(text) as { custom_id?: unknown }).custom_id ?? "");
      // No request ran, so none has an id of its own: one per line of this batch, the same at every read.
      const requestId = `req_${b.id.slice(b.id.indexOf("_") + 1)}${n.toString(16).padStart(6, "0")}`;
      yield { custom_id, result: { type: "errored", error: anthropicError(status, byLine.get(n) ?? first, null, requestId) } };
    }
  }

  /** An ended batch's results as JSONL lines: each request's errored line if the file failed validation. */
  async *results(batch: Batch, owner: Owner | undefined) {
    const lines = batch.errors?.data.length
      ? this.validationFailures(batch, owner)
      : this.resultLines([batch.output_file_id, batch.error_file_id], owner);
    for await (const line of lines) yield JSON.stringify(line);
  }

  async show(req: Request, b: Batch, owner: Owner | undefined) {
    // Behind a proxy that terminates TLS, the address the client used is the one it forwarded.
    const proto = req.get("x-forwarded-proto")?.split(",")[0].trim() || req.protocol;
    const host = req.get("x-forwarded-host")?.split(",")[0].trim() || req.get("host");
    const url = `${proto}://${host}${ANTHROPIC_PREFIX}/batches/${messageBatchId(b.id)}/results`;
    return toMessageBatch(b, url, await this.countsOf(b, owner));
  }

  /** A page of message batches, newest first, after `after_id` or just newer than `before_id`. */
  async page(q: z.infer<typeof AnthropicPageQuery>, owner: Owner | undefined) {
    if (q.before_id) return this.pageBefore(q.before_id, q.limit, owner);
    const after = q.after_id && (await this.find(q.after_id, owner)).id;
    return this.deps.views.search({ endpoint: ENDPOINT, after, limit: q.limit, owner });
  }

  /**
   * The page just newer than `before` (Anthropic's before_id), still newest first; has_more says whether newer
   * ones remain. Batches are kept newest first only, so this reads forward from the newest to `before`.
   */
  private async pageBefore(beforeId: string, limit: number, owner: Owner | undefined) {
    const before = (await this.find(beforeId, owner)).id;
    const newer: Batch[] = [];
    scan: for (let after: string | undefined; ; ) {
      const page = await this.deps.batches.list({ after, limit: 100, owner });
      for (const b of page.data) {
        if (b.id === before) break scan;
        if (b.endpoint === ENDPOINT) newer.push(b);
      }
      if (!page.has_more || page.data.length === 0) break;
      after = page.data.at(-1)?.id;
    }
    return { data: newer.slice(-limit), has_more: newer.length > limit };
  }
}

export function messageBatchesRouter(deps: MessageBatchDeps): Router {
  const { batches } = deps;
  const reads = new MessageBatchReads(deps);
  const router = Router();

  router.post(`${ANTHROPIC_PREFIX}/batches`, async (req, res) => {
    const owner = ownerFrom(res);
    const { requests } = parseRequest(CreateMessageBatchBody, req.body ?? {});
    const lines = requests.map((r) => ({ custom_id: r.custom_id, method: "POST" as const, url: ENDPOINT, body: r.params }));
    const batch = await batches.createInline({ endpoint: ENDPOINT, completion_window: "24h", lines, owner, mixedModels: true });
    res.json(await reads.show(req, batch, owner));
  });

  router.get(`${ANTHROPIC_PREFIX}/batches`, async (req, res) => {
    const owner = reads.scopeOf(res);
    const page = await reads.page(parseRequest(AnthropicPageQuery, req.query), owner);
    const data = await Promise.all(page.data.map((b) => reads.show(req, b, owner)));
    res.json({ data, has_more: page.has_more, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null });
  });

  router.get(`${ANTHROPIC_PREFIX}/batches/:batch_id`, async (req, res) => {
    const owner = reads.scopeOf(res);
    res.json(await reads.show(req, await reads.find(req.params.batch_id, owner), owner));
  });

  router.post(`${ANTHROPIC_PREFIX}/batches/:batch_id/cancel`, async (req, res) => {
    const { batch, owner } = await reads.own(res, req.params.batch_id, "cancel");
    res.json(await reads.show(req, await batches.cancel(batch.id, owner), owner));
  });

  router.delete(`${ANTHROPIC_PREFIX}/batches/:batch_id`, async (req, res) => {
    const { batch, owner } = await reads.own(res, req.params.batch_id, "delete");
    // The service refuses a batch still running (batch_not_finished), as Anthropic does.
    await batches.delete(batch.id, owner);
    reads.forget(batch.id);
    res.json({ id: messageBatchId(batch.id), type: "message_batch_deleted" });
  });

  router.get(`${ANTHROPIC_PREFIX}/batches/:batch_id/results`, async (req, res) => {
    const { batch, owner } = await reads.own(res, req.params.batch_id, "read the results of");
    if (!isFinal(batch.status)) throw badRequest(`Message batch '${batch.id}' has not ended yet; its results are not available.`, null);
    await sendJsonl(res, reads.results(batch, owner));
  });

  return router;
}

// --- OpenAPI ---

const MessageBatchSchema = z
  .object({
    id: z.string(),
    type: z.literal("message_batch"),
    processing_status: z.enum(["in_progress", "canceling", "ended"]),
    request_counts: z.object({
      processing: z.number().int(),
      succeeded: z.number().int(),
      errored: z.number().int(),
      canceled: z.number().int(),
      expired: z.number().int(),
    }),
    created_at: z.string(),
    expires_at: z.string(),
    ended_at: z.string().nullable(),
    cancel_initiated_at: z.string().nullable(),
    archived_at: z.string().nullable(),
    results_url: z.string().nullable(),
  })
  .openapi("MessageBatch", { description: "Anthropic's Message Batch object." });

const AnthropicErrorSchema = z
  .object({
    type: z.literal("error"),
    error: z.object({ type: z.string(), message: z.string() }),
    request_id: z.string().nullable(),
  })
  .openapi("AnthropicError");

const errors = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((s) => [String(s), jsonResponse(AnthropicErrorSchema, "Anthropic's error envelope.")]));

export function registerMessageBatchesPaths(r: OpenAPIRegistry, ctx: DocContext): void {
  const tags = ["Anthropic Message Batches"];
  const params = BatchIdParams;
  const route = (method: "get" | "post" | "delete", path: string, summary: string, extra: object, ok: z.ZodType) =>
    r.registerPath(
      keyedRoute({
        method,
        path: `${ANTHROPIC_PREFIX}/batches${path}`,
        tags,
        summary,
        ...extra,
        responses: { 200: jsonResponse(ok, summary), ...errors(400, 401, 403, 404, 429, 500, 503) },
      }),
    );
  route(
    "post",
    "",
    "Create a message batch",
    {
      request: {
        body: {
          required: true,
          content: {
            "application/json": {
              schema: CreateMessageBatchBody,
              // What "Try it out" sends: a batch whose one request runs as it is here.
              example: { requests: [{ custom_id: "greeting-1", params: syncExample("/v1/messages", ctx.model) }] },
            },
          },
        },
      },
    },
    MessageBatchSchema,
  );
  route(
    "get",
    "",
    "List message batches",
    { request: { query: AnthropicPageQuery } },
    z.object({ data: z.array(MessageBatchSchema), has_more: z.boolean(), first_id: z.string().nullable(), last_id: z.string().nullable() }),
  );
  route("get", "/{batch_id}", "Retrieve a message batch", { request: { params } }, MessageBatchSchema);
  route("post", "/{batch_id}/cancel", "Cancel a message batch", { request: { params } }, MessageBatchSchema);
  route(
    "delete",
    "/{batch_id}",
    "Delete an ended message batch",
    { request: { params } },
    z.object({ id: z.string(), type: z.literal("message_batch_deleted") }),
  );
  route(
    "get",
    "/{batch_id}/results",
    "Stream a message batch's results (JSONL)",
    { request: { params } },
    z.object({ custom_id: z.string(), result: z.record(z.string(), z.unknown()) }),
  );
}

export const messageBatchesRoutes: RouteModule = {
  source: import.meta.url,
  router: (d) => messageBatchesRouter({ batches: d.batches, views: d.views, files: d.files, organization: d.organization }),
  paths: registerMessageBatchesPaths,
};
