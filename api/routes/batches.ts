// /v1/batches: create (OpenAI's file form or the proof of concept's inline form), retrieve, list,
// cancel, and the proof of concept's /results view.
import { Router } from "express";
import type { BatchService } from "../../domain/ports.js";
import { ApiError, badRequest, notFound } from "../errors.js";
import { ownerFrom } from "../http/auth.js";
import { sendJsonl, sendJsonlAsList } from "../http/jsonl-response.js";
import { listObject } from "../http/list.js";
import { parseId, parseRequest } from "../http/validate.js";
import {
  BATCH_ID_PATTERN,
  CreateBatchBody,
  InlineBatchRequest,
  isInlineBatchBody,
  ListBatchesQuery,
  ResultsQuery,
} from "../schemas/requests.js";
import { InlineBatchError, inlineToLines } from "../../pipeline/inline.js";

/** Builds the lines of an already validated inline body (the schema ran the same plan, so this rarely throws). */
function linesOf(inline: Parameters<typeof inlineToLines>[0]) {
  try {
    return inlineToLines(inline);
  } catch (err) {
    if (err instanceof InlineBatchError) throw badRequest(err.message, err.param);
    throw err;
  }
}

export function batchesRouter(batches: BatchService): Router {
  const router = Router();
  const batchId = (id: unknown) => parseId("batch", BATCH_ID_PATTERN, id);

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

  router.get("/v1/batches", async (req, res) => {
    const q = parseRequest(ListBatchesQuery, req.query);
    res.json(listObject(await batches.list({ ...q, owner: ownerFrom(res) })));
  });

  router.get("/v1/batches/:batch_id", async (req, res) => {
    const id = batchId(req.params.batch_id);
    const batch = await batches.get(id, ownerFrom(res));
    if (!batch) throw notFound("batch", id);
    res.json(batch);
  });

  router.post("/v1/batches/:batch_id/cancel", async (req, res) => {
    const id = batchId(req.params.batch_id);
    res.json(await batches.cancel(id, ownerFrom(res)));
  });

  router.get("/v1/batches/:batch_id/results", async (req, res) => {
    const id = batchId(req.params.batch_id);
    const owner = ownerFrom(res);
    const { format } = parseRequest(ResultsQuery, req.query);
    const batch = await batches.get(id, owner);
    if (!batch) throw notFound("batch", id);
    const lines = await batches.results(id, owner);
    if (!lines) {
      throw new ApiError(404, `Batch '${id}' has no results yet (status: ${batch.status}).`, "invalid_request_error", "results_not_ready");
    }
    await (format === "jsonl" ? sendJsonl(res, lines) : sendJsonlAsList(res, lines));
  });

  return router;
}
