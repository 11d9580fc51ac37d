// The OpenAPI document, built from the same zod schemas the routes validate with.
// Every route the app serves is registered here; tests/api/openapi-routes.test.ts checks the two agree.
import { OpenAPIRegistry, OpenApiGeneratorV31, type ResponseConfig, type RouteConfig } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import type { PoolStatus, QueueStats } from "../domain/ports.js";
import { queueFull } from "../domain/errors.js";
import { badRequest, fileTooLarge, internalError, modelNotReady, notFound, unauthorized } from "./errors.js";
import { toApiError } from "./http/error-handler.js";
import { BatchSchema, ErrorSchema, FileDeletedSchema, FileObjectSchema, listOf } from "../domain/objects.js";
import {
  BatchIdParams,
  CreateBatchBody,
  FileIdParams,
  InlineBatchRequest,
  ListBatchesQuery,
  ListFilesQuery,
  ResultsQuery,
  UploadFileForm,
} from "./schemas/requests.js";

// --- response shapes that only exist on this surface (documentation only) ---

const QueueStatsSchema = z
  .object({ depth: z.number().int(), max_depth: z.number().int(), running: z.number().int() })
  .openapi("QueueStats", { example: { depth: 3, max_depth: 100, running: 2 } }) satisfies z.ZodType<QueueStats>;

const PoolStatusSchema = z
  .object({
    name: z.enum(["spot", "dedicated"]),
    capacity: z.number().int(),
    in_use: z.number().int(),
    available: z.number().int(),
    preempted: z.number().int().openapi({ description: "Slots taken away by a simulated preemption, back after the cooldown." }),
    preemptions: z.number().int().openapi({ description: "Simulated preemptions since the service started." }),
    jobs: z.array(z.string()).openapi({ description: "Ids of the batches holding a slot (with keys on: the caller's own)." }),
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
      { name: "spot", capacity: 2, in_use: 1, available: 1, preempted: 0, preemptions: 0, jobs: ["batch_6a1f0c2e9b7d4e3f8a5b1c0d"] },
      { name: "dedicated", capacity: 1, in_use: 0, available: 1, preempted: 0, preemptions: 0, jobs: [] },
    ],
  },
});

const BackendSchema = z
  .object({
    kind: z.string().openapi({ description: 'Where requests run: "local" (the embedded engine).' }),
    endpoints: z.array(z.string()).openapi({ description: "The batch endpoints this deployment serves." }),
    concurrency: z.number().int().openapi({ description: "Requests the service keeps in flight toward the backend." }),
    generated_model: z.boolean().openapi({ description: "True when serving the project's own random-weights model." }),
    settings: z.record(z.string(), z.unknown()).openapi({
      description: "The backend's own settings (for the local engine: threads, sequences, chat template…); no path or secret.",
    }),
  })
  .openapi("Backend");

const ReadySchema = z
  .object({
    status: z.literal("ready"),
    model: z
      .string()
      .openapi({ description: "The primary model (the default one, else the first of the models file): up from the start." }),
    backend: BackendSchema,
    models: z
      .array(
        z.object({
          name: z.string(),
          kind: z.enum(["local", "upstream"]),
          state: z.enum(["unloaded", "loading", "loaded"]),
          batches: z.number().int().openapi({ description: "Batches using it now." }),
        }),
      )
      .openapi({ description: "Every model of the registry and whether it is up; local ones load when a batch needs them." }),
  })
  .openapi("Ready");
const HealthSchema = z.object({ status: z.literal("ok") }).openapi("Health", { example: { status: "ok" } });
const RootSchema = z
  .object({ status: z.literal("ok"), service: z.string(), version: z.string(), docs: z.string() })
  .openapi("ServiceInfo", { example: { status: "ok", service: "offline-batch-inference", version: "0.1.0", docs: "/docs" } });

const StatusPageDataSchema = z
  .object({
    service: z.object({ name: z.string(), version: z.string() }),
    model: z.string().nullable(),
    now: z.number().int(),
    queue: QueueStatsSchema,
    pools_simulated: z.literal(true),
    pools: z.array(PoolStatusSchema),
    batches: z.array(BatchSchema),
    has_more: z.boolean(),
  })
  .openapi("StatusPageData", {
    description: "Everything the status page at / shows: the queue, the pools and the newest batches (up to 500).",
  });

const BatchOutputLineSchema = z
  .object({
    id: z.string(),
    custom_id: z.string(),
    response: z.object({ status_code: z.number().int(), request_id: z.string(), body: z.record(z.string(), z.unknown()) }).nullable(),
    error: z.object({ code: z.string(), message: z.string() }).nullable(),
  })
  .openapi("BatchOutputLine", { description: "One line of a batch's output file, as OpenAI writes it." });

const ResultsListSchema = z.object({ object: z.literal("list"), data: z.array(BatchOutputLineSchema) }).openapi("BatchResults");

// --- helpers ---

const json = (schema: z.ZodType, description: string): ResponseConfig => ({ description, content: { "application/json": { schema } } });

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: "Invalid request: `param` names the offending parameter.",
  401: "Missing or wrong API key (only when the service runs with API_KEYS).",
  404: "No such object (or it belongs to another API key).",
  413: "The upload or body is larger than the configured limit.",
  429: "The batch queue is full; retry after the Retry-After header's seconds.",
  503: "Not now: the model is not loaded yet, or the service is shutting down (see Retry-After).",
};

// Built by the same constructors the service throws, so the documented bodies cannot drift from the real ones.
const ERROR_EXAMPLES: Record<number, object> = {
  400: badRequest("Invalid 'limit': must be between 1 and 100.", "limit").toBody(),
  401: unauthorized().toBody(),
  404: notFound("batch", "batch_x").toBody(),
  413: fileTooLarge(209_715_200).toBody(),
  429: toApiError(queueFull(30), { maxFileBytes: 0 })!.toBody(),
  500: internalError().toBody(),
  503: modelNotReady().toBody(),
};

function errors(...statuses: number[]): RouteConfig["responses"] {
  const out: RouteConfig["responses"] = {};
  for (const s of [...statuses, 500]) {
    out[String(s)] = {
      description: ERROR_DESCRIPTIONS[s] ?? "Internal error.",
      content: { "application/json": { schema: ErrorSchema, example: ERROR_EXAMPLES[s] } },
    };
  }
  return out;
}

type Route = Omit<RouteConfig, "security">;

/** The /v1 routes (and the operational views) require a key when API_KEYS is set. */
const keyed = (route: Route): RouteConfig => ({ ...route, security: [{ bearerAuth: [] }] });
const open = (route: Route): RouteConfig => ({ ...route, security: [] });

function registerFiles(r: OpenAPIRegistry) {
  r.registerPath(
    keyed({
      method: "post",
      path: "/v1/files",
      tags: ["Files"],
      summary: "Upload a JSONL file of batch requests",
      description:
        "Multipart upload with a `file` part and `purpose=batch`. The file is streamed to disk; its lines are validated when a batch is created.",
      request: { body: { required: true, content: { "multipart/form-data": { schema: UploadFileForm } } } },
      responses: { 200: json(FileObjectSchema, "The stored file."), ...errors(400, 401, 413) },
    }),
  );
  r.registerPath(
    keyed({
      method: "get",
      path: "/v1/files",
      tags: ["Files"],
      summary: "List files",
      request: { query: ListFilesQuery },
      responses: {
        200: json(listOf(FileObjectSchema, "FileList"), "A page of files; pass the last id as `after` for the next."),
        ...errors(400, 401),
      },
    }),
  );
  r.registerPath(
    keyed({
      method: "get",
      path: "/v1/files/{file_id}",
      tags: ["Files"],
      summary: "Retrieve a file",
      request: { params: FileIdParams },
      responses: { 200: json(FileObjectSchema, "The file."), ...errors(401, 404) },
    }),
  );
  r.registerPath(
    keyed({
      method: "get",
      path: "/v1/files/{file_id}/content",
      tags: ["Files"],
      summary: "Download a file's content",
      request: { params: FileIdParams },
      responses: {
        200: {
          description:
            "The file's bytes: application/jsonl for .jsonl files (inputs, outputs, errors), application/octet-stream otherwise.",
          content: {
            "application/jsonl": {
              schema: { type: "string" },
              example: '{"id":"batch_req_1","custom_id":"req-1","response":{...},"error":null}\n',
            },
            "application/octet-stream": { schema: { type: "string", format: "binary" } },
          },
        },
        ...errors(401, 404),
      },
    }),
  );
  r.registerPath(
    keyed({
      method: "delete",
      path: "/v1/files/{file_id}",
      tags: ["Files"],
      summary: "Delete a file",
      request: { params: FileIdParams },
      responses: { 200: json(FileDeletedSchema, "The file is gone."), ...errors(401, 404) },
    }),
  );
}

function registerBatches(r: OpenAPIRegistry) {
  r.registerPath(
    keyed({
      method: "post",
      path: "/v1/batches",
      tags: ["Batches"],
      summary: "Create a batch",
      description:
        "OpenAI's form names an uploaded file (`input_file_id`). The proof of concept's inline form sends the prompts in the body " +
        "(`input: [{prompt}]`); it is recognised by an `input` array and no `input_file_id`, and becomes a /v1/completions batch.",
      request: {
        body: {
          required: true,
          content: {
            "application/json": {
              schema: z.union([CreateBatchBody, InlineBatchRequest]).openapi({ description: "OpenAI's file form or the inline form." }),
              examples: {
                file: {
                  summary: "OpenAI file form",
                  value: { input_file_id: "file-3c9d1e2f4a5b6c7d8e9f0a1b", endpoint: "/v1/chat/completions", completion_window: "24h" },
                },
                inline: {
                  summary: "Inline form (proof of concept)",
                  value: { model: "stories260K", input: [{ prompt: "Once upon a time" }, { prompt: "The cat" }], max_tokens: 50 },
                },
              },
            },
          },
        },
      },
      responses: { 200: json(BatchSchema, "The batch, usually still `validating`."), ...errors(400, 401, 404, 429, 503) },
    }),
  );
  r.registerPath(
    keyed({
      method: "get",
      path: "/v1/batches",
      tags: ["Batches"],
      summary: "List batches",
      request: { query: ListBatchesQuery },
      responses: { 200: json(listOf(BatchSchema, "BatchList"), "A page of batches, newest first."), ...errors(400, 401) },
    }),
  );
  r.registerPath(
    keyed({
      method: "get",
      path: "/v1/batches/{batch_id}",
      tags: ["Batches"],
      summary: "Retrieve a batch",
      request: { params: BatchIdParams },
      responses: { 200: json(BatchSchema, "The batch."), ...errors(401, 404) },
    }),
  );
  r.registerPath(
    keyed({
      method: "post",
      path: "/v1/batches/{batch_id}/cancel",
      tags: ["Batches"],
      summary: "Cancel a batch",
      description: "Queued batches end at once (`cancelled`); running ones pass through `cancelling` and keep the results they have.",
      request: { params: BatchIdParams },
      responses: { 200: json(BatchSchema, "The batch, `cancelling` or `cancelled`."), ...errors(401, 404) },
    }),
  );
  r.registerPath(
    keyed({
      method: "get",
      path: "/v1/batches/{batch_id}/results",
      tags: ["Proof of concept"],
      summary: "A batch's output lines",
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
        ...errors(400, 401, 404),
      },
    }),
  );
}

function registerOperations(r: OpenAPIRegistry) {
  r.registerPath(
    keyed({
      method: "get",
      path: "/queue/stats",
      tags: ["Proof of concept"],
      summary: "Queue depth",
      responses: { 200: json(QueueStatsSchema, "Jobs waiting, the bound, and jobs running."), ...errors(401) },
    }),
  );
  r.registerPath(
    keyed({
      method: "post",
      path: "/pools/spot/preempt",
      tags: ["Proof of concept"],
      summary: "Simulate a spot preemption: the spot batches checkpoint and resume on other capacity",
      description:
        "The spot pool's slots are gone for SPOT_PREEMPT_COOLDOWN_SECONDS. Its running batches stop as on a shutdown " +
        "(requests in flight get SHUTDOWN_GRACE_SECONDS to finish and are kept; nothing runs twice) and go back to the " +
        "queue first in line, to resume on dedicated capacity, or on spot once it is back.",
      responses: {
        200: json(
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
        ...errors(401),
      },
    }),
  );
  r.registerPath(
    keyed({
      method: "get",
      path: "/pools",
      tags: ["Proof of concept"],
      summary: "Simulated GPU pool status",
      responses: { 200: json(PoolsSchema, "Each pool's capacity and the jobs in it."), ...errors(401) },
    }),
  );
  r.registerPath(
    keyed({
      method: "get",
      path: "/status.json",
      tags: ["Operations"],
      summary: "The status page's data",
      description: "What the status page at / polls. With API keys on, a key sees its own batches; the counts stay global.",
      responses: { 200: json(StatusPageDataSchema, "Queue, pools and batches."), ...errors(401) },
    }),
  );
}

const ModelSchema = z
  .object({
    id: z.string().openapi({ example: "stories" }),
    object: z.literal("model"),
    created: z.number().int(),
    owned_by: z.string().openapi({ description: "`local` (a GGUF in this service) or `upstream` (an OpenAI-compatible server)." }),
  })
  .openapi("Model");

function registerModels(r: OpenAPIRegistry) {
  r.registerPath(
    keyed({
      method: "get",
      path: "/v1/models",
      tags: ["Models"],
      summary: "List the models a batch line may name (MODELS_FILE, or the one model)",
      responses: {
        200: json(z.object({ object: z.literal("list"), data: z.array(ModelSchema) }).openapi("ModelList"), "The models."),
        ...errors(401),
      },
    }),
  );
  r.registerPath(
    keyed({
      method: "get",
      path: "/v1/models/{model}",
      tags: ["Models"],
      summary: "Retrieve a model by its name or an alias (names may hold slashes)",
      request: { params: z.object({ model: z.string().openapi({ example: "Qwen/Qwen2.5-0.5B-Instruct" }) }) },
      responses: { 200: json(ModelSchema, "The model."), ...errors(401, 404) },
    }),
  );
}

function registerSystem(r: OpenAPIRegistry) {
  const system = (path: string, summary: string, responses: RouteConfig["responses"]) =>
    r.registerPath(open({ method: "get", path, tags: ["System"], summary, responses }));
  system("/", "Service name and version, or the status page for a browser", {
    200: {
      description: "JSON for API clients; the live status page (queue, pools, batches) when the client prefers text/html.",
      content: { "application/json": { schema: RootSchema }, "text/html": { schema: { type: "string" } } },
    },
  });
  system("/metrics", "Prometheus metrics", {
    200: { description: "Prometheus text exposition format 0.0.4.", content: { "text/plain": { schema: { type: "string" } } } },
  });
  system("/health", "Liveness: the process is up", { 200: json(HealthSchema, "Up.") });
  system("/ready", "Readiness: the model is loaded", { 200: json(ReadySchema, "Ready, with the backend's settings."), ...errors(503) });
  system("/openapi.json", "This document", {
    200: { description: "OpenAPI 3.1 document.", content: { "application/json": { schema: { type: "object" } } } },
  });
  system("/docs", "Swagger UI for this document", {
    200: { description: "HTML page.", content: { "text/html": { schema: { type: "string" } } } },
  });
}

export function buildOpenApiDocument(opts: { version?: string } = {}): object {
  const registry = new OpenAPIRegistry();
  registry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "Only enforced when the service runs with API_KEYS; send `Authorization: Bearer <key>`.",
  });
  registerFiles(registry);
  registerBatches(registry);
  registerModels(registry);
  registerOperations(registry);
  registerSystem(registry);
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: "3.1.0",
    info: {
      title: "Offline batch inference",
      version: opts.version ?? "0.0.0",
      description:
        "An OpenAI Batch API compatible service running node-llama-cpp on a local GGUF model. " +
        "Upload a JSONL file, create a batch, poll it, download the output file; the official OpenAI clients work unchanged.",
    },
    security: [{ bearerAuth: [] }],
    tags: [
      { name: "Files", description: "OpenAI Files API (purpose=batch)." },
      { name: "Batches", description: "OpenAI Batch API." },
      { name: "Proof of concept", description: "Routes kept from the proof of concept; not part of OpenAI's API." },
      { name: "System", description: "Health, readiness and documentation; never need a key." },
    ],
  });
}
