// OpenAI wire objects, field for field as in openai-node (resources/batches.ts, files.ts),
// plus our SLA fields. These zod schemas feed both validation and the OpenAPI document.
import { extendZodWithOpenApi } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { ENDPOINTS } from "../openai/backend.js";

extendZodWithOpenApi(z);

export const BATCH_STATUSES = [
  "validating",
  "failed",
  "in_progress",
  "finalizing",
  "completed",
  "expired",
  "cancelling",
  "cancelled",
] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];

/** The endpoints OpenAI's Batch API takes; which of them this deployment serves is its backend's to say. */
/** What OpenAI's Batch object may name: the endpoints served here, and moderations (refused at creation). */
export const BATCH_ENDPOINTS = [...ENDPOINTS, "/v1/moderations"] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** OpenAI's limits on batch metadata; requests.ts checks them with messages, this schema describes them. */
export const METADATA_LIMITS = { keys: 16, keyChars: 64, valueChars: 512 } as const;
export const METADATA_DESCRIPTION =
  `Up to ${METADATA_LIMITS.keys} key-value pairs; keys up to ${METADATA_LIMITS.keyChars} characters, values up to ${METADATA_LIMITS.valueChars}. ` +
  "Extension: the keys `max_error_rate` (a fraction), `max_cost` (in the model's price currency) and `max_output_tokens` are stop rules " +
  "that end the running batch `failed` once passed (docs/api.md#stop-rules); a value that is not such a limit is a 400 naming the key.";

export const Metadata = z
  .record(z.string().max(METADATA_LIMITS.keyChars), z.string().max(METADATA_LIMITS.valueChars))
  .refine((m) => Object.keys(m).length <= METADATA_LIMITS.keys, { message: `metadata may hold at most ${METADATA_LIMITS.keys} keys` })
  .nullable()
  .openapi("Metadata", { description: METADATA_DESCRIPTION, example: { project: "nightly-eval" } });

export const BatchErrorSchema = z
  .object({
    code: z.string().optional(),
    line: z.number().int().nullable().optional(),
    message: z.string().optional(),
    param: z.string().nullable().optional(),
  })
  .openapi("BatchError");

export const RequestCounts = z
  .object({ completed: z.number().int(), failed: z.number().int(), total: z.number().int() })
  .openapi("BatchRequestCounts");

export const BatchUsage = z
  .object({
    input_tokens: z.number().int(),
    input_tokens_details: z.object({ cached_tokens: z.number().int() }),
    output_tokens: z.number().int(),
    output_tokens_details: z.object({
      reasoning_tokens: z.number().int(),
      // Extension field: of the output tokens, those of answers read rather than computed (not charged by `cost`).
      cached_tokens: z.number().int().optional(),
    }),
    total_tokens: z.number().int(),
  })
  .openapi("BatchUsage");

export const PoolName = z.enum(["spot", "dedicated"]);
export type PoolName = z.infer<typeof PoolName>;

const EngineSecondsSchema = z
  .object({ spot: z.number().min(0), dedicated: z.number().min(0) })
  .openapi({ description: "Seconds the batch's shards held a slot of each pool (committed work; an extension field)." });

export const CostSchema = z
  .object({
    currency: z.string(),
    amount: z.number().min(0),
    basis: z.enum(["pool_hours", "tokens"]),
    spot: z.number().min(0).nullable(),
    dedicated: z.number().min(0).nullable(),
  })
  .openapi("BatchCost", {
    description:
      "What the batch cost at its model's price in the models file (an extension field; null without a price): per pool hour " +
      "(`engine_seconds` at each pool's rate, split by pool) or per million tokens (`usage`; no split by pool).",
  });
export type Cost = z.infer<typeof CostSchema>;

export const ModelUsageSchema = z
  .object({
    request_counts: RequestCounts,
    cached_lines: z.number().int().min(0),
    usage: BatchUsage,
    engine_seconds: EngineSecondsSchema,
    cost: CostSchema.nullable().optional(),
  })
  .openapi("BatchModelUsage", {
    description: "One model's share of a batch whose lines name several: its lines, their usage, engine time and cost at its own price.",
  });
export type ModelUsage = z.infer<typeof ModelUsageSchema>;

export const BatchSchema = z
  .object({
    id: z.string(),
    object: z.literal("batch"),
    endpoint: z.string(),
    model: z.string().optional(),
    errors: z.object({ object: z.literal("list"), data: z.array(BatchErrorSchema) }).nullable(),
    input_file_id: z.string(),
    completion_window: z.string(),
    status: z.enum(BATCH_STATUSES),
    output_file_id: z.string().nullable(),
    error_file_id: z.string().nullable(),
    created_at: z.number().int(),
    in_progress_at: z.number().int().nullable(),
    expires_at: z.number().int().nullable(),
    finalizing_at: z.number().int().nullable(),
    completed_at: z.number().int().nullable(),
    failed_at: z.number().int().nullable(),
    expired_at: z.number().int().nullable(),
    cancelling_at: z.number().int().nullable(),
    cancelled_at: z.number().int().nullable(),
    request_counts: RequestCounts,
    // Extension field: of the completed lines, those answered without running (a repeat of another line of the
    // batch, or an answer in the result cache). Records kept before it was counted read as none.
    cached_lines: z.number().int().min(0).default(0).openapi({
      description: "Of the completed lines, those answered without running: repeats of another line, and result cache hits.",
    }),
    usage: BatchUsage,
    metadata: Metadata,
    // SLA extension fields (not in OpenAI's object; clients ignore unknown fields).
    submitted_at: z.number().int(),
    deadline_at: z.number().int(),
    deadline_met: z.boolean().nullable(),
    pool: PoolName.nullable(),
    // Cost extension fields: engine time by pool, and what it cost at the models file's price.
    // Records written before engine time was kept read as none.
    engine_seconds: EngineSecondsSchema.default({ spot: 0, dedicated: 0 }),
    cost: CostSchema.nullable().optional(),
    // Cost extension field, on a batch whose lines name several models (a base and its adapters): each model's
    // counts, usage, engine time and cost, by model name; the batch's own figures are their sums.
    usage_by_model: z.record(z.string(), ModelUsageSchema).optional(),
    // SLA extension fields: when the batch ends at its rate so far, and whether that is past its deadline (null
    // once it ended, and while estimating: until 20 lines, or 5% of a larger batch, and 30 s have run).
    projected_finish_at: z.number().int().nullable().optional(),
    // Pause extension field: when the batch was paused (null: it runs, or it has ended). A paused batch claims
    // nothing; its status stays what it was (`in_progress` once it started) and its completion window keeps running.
    // A batch that ends, however, is no longer paused: this is cleared as it begins to end.
    paused_at: z.number().int().nullable().optional(),
    // Defaults extension field: the parameters every line took unless its body set them.
    default_params: z.record(z.string(), z.unknown()).nullable().optional(),
    deadline_at_risk: z.boolean().nullable().optional(),
  })
  .openapi("Batch", {
    example: {
      id: "batch_6a1f0c2e9b7d4e3f8a5b1c0d",
      object: "batch",
      endpoint: "/v1/chat/completions",
      model: "stories260K",
      errors: null,
      input_file_id: "file-3c9d1e2f4a5b6c7d8e9f0a1b",
      completion_window: "24h",
      status: "completed",
      output_file_id: "file-7e8f9a0b1c2d3e4f5a6b7c8d",
      error_file_id: null,
      created_at: 1763700000,
      in_progress_at: 1763700001,
      expires_at: 1763786400,
      finalizing_at: 1763700009,
      completed_at: 1763700010,
      failed_at: null,
      expired_at: null,
      cancelling_at: null,
      cancelled_at: null,
      request_counts: { completed: 2, failed: 0, total: 2 },
      usage: {
        input_tokens: 24,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 100,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 124,
      },
      metadata: { project: "nightly-eval" },
      submitted_at: 1763700000,
      deadline_at: 1763786400,
      deadline_met: true,
      pool: "spot",
      engine_seconds: { spot: 9.2, dedicated: 0 },
      cost: { currency: "USD", amount: 0.0023, basis: "pool_hours", spot: 0.0023, dedicated: 0 },
    },
  });
export type Batch = z.infer<typeof BatchSchema>;

export const FILE_PURPOSES = ["batch", "batch_output"] as const;

export const FileObjectSchema = z
  .object({
    id: z.string(),
    object: z.literal("file"),
    bytes: z.number().int(),
    created_at: z.number().int(),
    filename: z.string(),
    purpose: z.enum(FILE_PURPOSES),
    status: z.enum(["uploaded", "processed", "error"]),
    expires_at: z.number().int().nullable().optional(),
    status_details: z.string().nullable().optional(),
  })
  .openapi("FileObject", {
    example: {
      id: "file-3c9d1e2f4a5b6c7d8e9f0a1b",
      object: "file",
      bytes: 1024,
      created_at: 1763700000,
      filename: "batch_input.jsonl",
      purpose: "batch",
      status: "processed",
      expires_at: 1766292000,
    },
  });
export type FileObject = z.infer<typeof FileObjectSchema>;

export const FileDeletedSchema = z.object({ id: z.string(), object: z.literal("file"), deleted: z.boolean() }).openapi("FileDeleted");

export const ErrorSchema = z
  .object({
    error: z.object({
      message: z.string(),
      type: z.string(),
      param: z.string().nullable(),
      code: z.string().nullable(),
    }),
  })
  .openapi("Error", {
    example: { error: { message: "No batch found with id 'batch_x'.", type: "invalid_request_error", param: null, code: "not_found" } },
  });

export function listOf<T extends z.ZodTypeAny>(item: T, name: string) {
  return z
    .object({
      object: z.literal("list"),
      data: z.array(item),
      first_id: z.string().nullable(),
      last_id: z.string().nullable(),
      has_more: z.boolean(),
    })
    .openapi(name);
}

/** OpenAI's Uploads API: a file sent in parts, completed into a File. */
export const UploadSchema = z
  .object({
    id: z.string().openapi({ example: "upload_5d1f0c2e9b7d4e3f8a5b1c0d" }),
    object: z.literal("upload"),
    bytes: z.number().int(),
    created_at: z.number().int(),
    expires_at: z.number().int(),
    filename: z.string(),
    purpose: z.string(),
    status: z.enum(["pending", "completed", "cancelled", "expired"]),
    file: FileObjectSchema.nullable().optional(),
  })
  .openapi("Upload");
export type Upload = z.infer<typeof UploadSchema>;

export const UploadPartSchema = z
  .object({ id: z.string(), object: z.literal("upload.part"), created_at: z.number().int(), upload_id: z.string() })
  .openapi("UploadPart");
export type UploadPart = z.infer<typeof UploadPartSchema>;
