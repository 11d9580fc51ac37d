// Dataset jobs over HTTP (an extension, docs/datasets.md): POST /v1/dataset_batches makes an uploaded dataset and a
// job's template into an ordinary batch; GET /v1/batches/{id}/table serves the ended batch as the dataset with its
// answers, in the format asked for.
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { type Response, Router } from "express";
import { z } from "zod";
import { ClientGoneError, type DatasetBatches, TABLE_FORMATS } from "../../domain/dataset-batches.js";
import { BatchSchema } from "../../domain/objects.js";
import type { BatchService } from "../../domain/ports.js";
import { ownBatchScope, ownerFrom } from "../http/auth.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import { streamTo } from "../http/stream.js";
import { parseId, parseRequest } from "../http/validate.js";
import { BATCH_ID_PATTERN, BatchIdParams, CreateBatchBody, queryObject } from "../schemas/requests.js";
import type { RouteModule } from "./route-module.js";

const JobFields = z.record(z.string(), z.unknown(), { error: "job must be an object of a dataset job's fields" }).openapi({
  description:
    "A dataset job's fields (docs/datasets.md): `messages`, `prompt` or `body` with `{{column}}` placeholders; `where`, `limit`, `model`, " +
    "`params`, `params_from`, `response_format`, `keep`, `result_prefix`, `result_names`. Not `input`, `output`, `preprocess` or `postprocess`.",
  example: { messages: [{ role: "user", content: "Label: {{review_text}}" }], params: { max_tokens: 16 }, where: "lang = 'en'" },
});

export const CreateDatasetBatchBody = CreateBatchBody.pick({ input_file_id: true, endpoint: true, completion_window: true, metadata: true })
  .extend({ job: JobFields })
  .strict()
  .openapi("CreateDatasetBatchRequest", {
    description: "An uploaded dataset (.parquet, .csv, .tsv, .jsonl, .ndjson, .json or .arrow, purpose `batch`) and a job's template.",
    example: {
      input_file_id: "file-3c9d1e2f4a5b6c7d8e9f0a1b",
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      job: { messages: [{ role: "user", content: "Label: {{review_text}}" }], params: { max_tokens: 16 } },
    },
  });

const TableQuery = queryObject({
  format: z.enum(TABLE_FORMATS, { error: `format must be one of ${TABLE_FORMATS.join(", ")}` }).default("parquet"),
});

/**
 * Aborted when the client goes away before its answer is sent (it disconnected, or the server's idle timeout closed
 * its connection): the read stops, leaves the queue, and no batch is recorded that no one could be told of.
 */
function clientGone(res: Response): AbortSignal {
  const gone = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) gone.abort(new ClientGoneError());
  });
  return gone.signal;
}

export function datasetsRouter(datasets: DatasetBatches, batches: Pick<BatchService, "get">): Router {
  const router = Router();

  router.post("/v1/dataset_batches", async (req, res) => {
    const body = parseRequest(CreateDatasetBatchBody, req.body ?? {});
    const gone = clientGone(res);
    const batch = await datasets.create({ ...body, owner: ownerFrom(res) }, gone).catch((err) => {
      // No one is left to answer: the create stopped and recorded nothing.
      if (err instanceof ClientGoneError) return undefined;
      throw err;
    });
    if (batch) res.json(batch);
  });

  router.get("/v1/batches/:batch_id/table", async (req, res) => {
    const id = parseId("batch", BATCH_ID_PATTERN, req.params.batch_id);
    const { format } = parseRequest(TableQuery, req.query);
    // The table holds the batch's answers: its own key's, as its results are, even for an admin who reads the batch.
    const owner = await ownBatchScope(batches, res, id, "download the table of");
    const gone = clientGone(res);
    const table = await datasets.table(id, owner, format, gone).catch((err) => {
      if (err instanceof ClientGoneError) return undefined;
      throw err;
    });
    if (!table) return;
    try {
      res.attachment(table.filename);
      res.set({ "Content-Type": table.contentType, "Content-Length": String((await stat(table.path)).size) });
      await streamTo(res, createReadStream(table.path));
    } finally {
      await table.remove();
    }
  });

  return router;
}

export function registerDatasetsPaths(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/dataset_batches",
      tags: ["Batches"],
      summary: "Create a batch from a dataset (extension)",
      description:
        "Renders every row of the uploaded dataset through the job's template into request lines, stores them as a file, and creates " +
        "an ordinary batch over it (its `metadata` names the dataset and the job). A bad job or dataset is a 400 naming the field, " +
        "or the file, row and column (a row past MAX_LINE_BYTES, request lines past MAX_FILE_BYTES); nothing is created. A create whose " +
        "client goes away before it is answered stops and creates nothing.",
      request: { body: { required: true, content: { "application/json": { schema: CreateDatasetBatchBody } } } },
      responses: { 200: jsonResponse(BatchSchema, "The batch, usually still `validating`."), ...errorResponses(400, 401, 404, 429, 503) },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/batches/{batch_id}/table",
      tags: ["Batches"],
      summary: "Download a dataset batch as its table (extension)",
      description:
        "The dataset with the answers' columns, every row in input order (a failed row carries `error_code`), once the batch has ended.",
      request: { params: BatchIdParams, query: TableQuery },
      responses: {
        200: {
          description: "The table in the format asked for.",
          content: {
            "application/vnd.apache.parquet": { schema: { type: "string", format: "binary" } },
            "text/csv": { schema: { type: "string" } },
            "text/tab-separated-values": { schema: { type: "string" } },
            "application/jsonl": { schema: { type: "string" } },
          },
        },
        ...errorResponses(400, 401, 404),
      },
    }),
  );
}

export const datasetsRoutes: RouteModule = {
  source: import.meta.url,
  router: (d) => (d.datasets ? datasetsRouter(d.datasets, d.batches) : undefined),
  paths: registerDatasetsPaths,
};
