// Request schemas of the HTTP surface: the routes validate with them and api/openapi.ts documents them,
// so what is accepted and what is documented cannot drift apart.
import { extendZodWithOpenApi } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { nearestKey } from "../../config/known-keys.js";
import { BATCH_ENDPOINTS, METADATA_DESCRIPTION, METADATA_LIMITS } from "../../domain/objects.js";
import { InlineBatchBodySchema } from "../../pipeline/inline.js";

extendZodWithOpenApi(z);

// --- ids in paths and bodies ---

// Ids are checked before any store sees them, so a path like "../../etc/passwd" never reaches the disk.
export const FILE_ID_PATTERN = /^file[-_][A-Za-z0-9]{1,120}$/;
export const BATCH_ID_PATTERN = /^batch[-_][A-Za-z0-9]{1,120}$/;

/**
 * Anthropic's routes name a batch `msgbatch_…`, as its clients expect; it is the same batch as `batch_…`, and
 * either route takes either form.
 */
export const batchIdFrom = (id: unknown): unknown => (typeof id === "string" && id.startsWith("msgbatch_") ? `batch_${id.slice(9)}` : id);
export const messageBatchId = (id: string): string => (id.startsWith("batch_") ? `msg${id}` : id);

export const FileIdParams = z.object({
  file_id: z
    .string()
    .regex(FILE_ID_PATTERN)
    .openapi({ param: { name: "file_id", in: "path", description: "The id of the file." }, example: "file-3c9d1e2f4a5b6c7d8e9f0a1b" }),
});

export const BatchIdParams = z.object({
  batch_id: z
    .string()
    .regex(BATCH_ID_PATTERN)
    .openapi({ param: { name: "batch_id", in: "path", description: "The id of the batch." }, example: "batch_6a1f0c2e9b7d4e3f8a5b1c0d" }),
});

// --- query strings (values arrive as strings; numbers are read from decimal digits only) ---

const cursor = z
  .string()
  .max(128)
  .optional()
  .openapi({ description: "A cursor: the id of the last object of the previous page; the list continues after it." });

/** OpenAI's files list takes 1..10000, default 10000. */
export const MAX_FILES_PAGE = 10_000;
/** OpenAI's batches list takes 1..100, default 20. */
export const MAX_BATCHES_PAGE = 100;

/**
 * A whole number from a query string, in decimal digits (a minus sign allowed, so that `-1` is told it is below the
 * range). Number() would also take `0x10`, `1e2`, `+3`, ` 1` and an empty value, so a typo would be read as a
 * request for something else.
 */
export const queryInt = (name: string, { min, max }: { min: number; max?: number }) => {
  const within = max === undefined ? `${name} must be ${min} or more` : `${name} must be between ${min} and ${max}`;
  const ceiling = max ?? Number.MAX_SAFE_INTEGER;
  return z
    .string({ error: `${name} must be an integer` })
    .regex(/^-?[0-9]+$/, `${name} must be an integer, in decimal digits`)
    .transform(Number)
    .pipe(
      z
        .number()
        .min(min, within)
        .max(ceiling, max === undefined ? `${name} must be at most ${ceiling}` : within),
    )
    .openapi({ type: "integer", minimum: min, ...(max === undefined ? {} : { maximum: max }) });
};

/**
 * A query string's schema: a parameter the route does not take is refused, naming it (`param`) and the nearest it
 * does take, as the usage routes do, rather than ignored (`?limt=2` answering 20 batches).
 */
export function queryObject<T extends z.core.$ZodLooseShape>(shape: T) {
  const valid = Object.keys(shape);
  return z.looseObject(shape).superRefine((q, ctx) => {
    for (const key of Object.keys(q)) {
      if (valid.includes(key)) continue;
      const near = nearestKey(key, valid);
      ctx.addIssue({
        code: "custom",
        path: [key],
        params: { whole: true },
        message: `Unknown parameter: '${key}'${near ? ` (did you mean '${near}'?)` : ""}. This endpoint takes ${valid.join(", ")}.`,
      });
    }
  });
}

const pageLimit = (max: number, dflt: number) =>
  queryInt("limit", { min: 1, max })
    .default(dflt)
    .openapi({ description: `How many objects to return, 1 to ${max}.`, default: dflt, example: Math.min(dflt, 20) });

export const ListFilesQuery = queryObject({
  after: cursor,
  limit: pageLimit(MAX_FILES_PAGE, MAX_FILES_PAGE),
  order: z
    .enum(["asc", "desc"], { error: 'order must be "asc" or "desc"' })
    .default("desc")
    .openapi({ description: "Sort by created_at." }),
  purpose: z.string().max(64).optional().openapi({ description: "Only files with this purpose.", example: "batch" }),
});

export const ListBatchesQuery = queryObject({
  after: cursor,
  limit: pageLimit(MAX_BATCHES_PAGE, 20),
  api_key_id: z
    .string()
    .min(1)
    .optional()
    .openapi({ description: "Admin keys: only this key's batches (an admin's list holds every key's batches)." }),
});

export const ResultsQuery = queryObject({
  format: z
    .enum(["json", "jsonl"], { error: 'format must be "json" or "jsonl"' })
    .default("json")
    .openapi({ description: "json: one list object; jsonl: the output lines as they are on disk." }),
});

/** Lines a read of a running batch's output returns at most. */
export const MAX_OUTPUT_LINES = 1_000_000;

export const OutputQuery = queryObject({
  after: queryInt("after", { min: 0 })
    .default(0)
    .openapi({ description: "Lines already read: the answer starts after the first `after` output lines.", default: 0, example: 0 }),
  limit: queryInt("limit", { min: 1, max: MAX_OUTPUT_LINES })
    .optional()
    .openapi({ description: "At most this many lines (default: every line committed so far)." }),
});

// --- POST /v1/files (multipart) ---

/** What multer hands over for the `file` part; only its presence is validated here. */
export interface UploadedFile {
  path: string;
  originalname: string;
  size: number;
}

/** OpenAI's retention setting for a file: `seconds` after its `created_at`, from 1 hour to 30 days. */
export const EXPIRES_AFTER_SECONDS = { min: 3600, max: 2_592_000 } as const;
const expiresAfter = (field: string) =>
  z
    .strictObject({
      anchor: z.literal("created_at", { error: `${field}.anchor must be 'created_at'` }),
      seconds: z.coerce
        .number({ error: `${field}.seconds must be a number` })
        .int(`${field}.seconds must be a whole number`)
        .min(EXPIRES_AFTER_SECONDS.min, `${field}.seconds must be at least ${EXPIRES_AFTER_SECONDS.min} (1 hour)`)
        .max(EXPIRES_AFTER_SECONDS.max, `${field}.seconds must be at most ${EXPIRES_AFTER_SECONDS.max} (30 days)`),
    })
    .optional()
    .openapi({
      description: `When the file expires: \`seconds\` (${EXPIRES_AFTER_SECONDS.min} to ${EXPIRES_AFTER_SECONDS.max}) after its created_at. Without it, FILE_EXPIRY_SECONDS applies.`,
      example: { anchor: "created_at", seconds: 86400 },
    });

export const UploadFileForm = z.object({
  file: z
    .custom<UploadedFile>((v) => v != null && typeof v === "object", { error: "a file part named 'file' is required" })
    .openapi({ type: "string", format: "binary", description: "The JSONL file of batch requests." }),
  purpose: z.literal("batch", { error: "purpose must be 'batch'" }).openapi({ description: "Only 'batch' is accepted.", example: "batch" }),
  // Sent as the form fields expires_after[anchor] and expires_after[seconds], as the openai client does.
  expires_after: expiresAfter("expires_after"),
});

/** A strict schema's error for fields it does not know, naming them (what: "request argument supplied", "query parameter"). */
export const unknownFields = (what: string) => ({
  error: (issue: z.core.$ZodRawIssue) =>
    issue.code === "unrecognized_keys" ? `Unrecognized ${what}: ${issue.keys.join(", ")}` : undefined,
});

// --- POST /v1/batches ---

export const COMPLETION_WINDOW_PATTERN = /^[1-9][0-9]{0,6}[smhd]$/;

export const CompletionWindow = z
  .string({ error: "completion_window must be a string" })
  .regex(
    COMPLETION_WINDOW_PATTERN,
    "completion_window must be a positive whole number followed by s, m, h or d, such as '24h', and at most 366 days",
  )
  .default("24h")
  .openapi({
    description:
      "How long the batch may take; its deadline is created_at plus this. OpenAI accepts only '24h'; here any '<n>s|m|h|d' works.",
    example: "24h",
  });

// Length limits are checked on the map as a whole so every violation reports param "metadata", as OpenAI does.
export const MetadataParam = z
  .record(z.string(), z.string({ error: "metadata values must be strings" }))
  .superRefine((m, ctx) => {
    const keys = Object.keys(m);
    if (keys.length > METADATA_LIMITS.keys)
      ctx.addIssue({ code: "custom", message: `metadata may hold at most ${METADATA_LIMITS.keys} keys` });
    const longKey = keys.find((k) => k.length > METADATA_LIMITS.keyChars);
    if (longKey !== undefined)
      ctx.addIssue({ code: "custom", message: `metadata keys may be at most ${METADATA_LIMITS.keyChars} characters` });
    const longValue = keys.find((k) => m[k].length > METADATA_LIMITS.valueChars);
    if (longValue !== undefined) {
      ctx.addIssue({
        code: "custom",
        message: `metadata value of '${longValue.slice(0, 64)}' is longer than ${METADATA_LIMITS.valueChars} characters`,
      });
    }
  })
  .nullable()
  .optional()
  .openapi({
    description: METADATA_DESCRIPTION,
    maxProperties: METADATA_LIMITS.keys,
    example: { project: "nightly-eval" },
  });

// Strict: a field the form does not take (max_tokens copied from the inline form, input beside input_file_id) is
// refused by name, never dropped.
export const CreateBatchBody = z
  .strictObject({
    input_file_id: z
      .string({ error: "input_file_id must be a string" })
      .regex(FILE_ID_PATTERN, "input_file_id must be the id of an uploaded file, such as 'file-abc123'")
      .openapi({ example: "file-3c9d1e2f4a5b6c7d8e9f0a1b" }),
    endpoint: z
      .enum(BATCH_ENDPOINTS, { error: `endpoint must be one of ${BATCH_ENDPOINTS.join(", ")}` })
      .openapi({ example: "/v1/chat/completions" }),
    completion_window: CompletionWindow,
    metadata: MetadataParam,
    output_expires_after: expiresAfter("output_expires_after"),
    default_params: z
      .record(z.string(), z.unknown(), { error: "default_params must be an object of request parameters" })
      .optional()
      .openapi({
        description:
          "Extension: request parameters (such as `temperature`, `max_tokens`) for every line whose body does not set them; " +
          "checked against the endpoint's schema at create (a 400 names `default_params.<key>`), shown on the batch.",
        example: { temperature: 0, max_tokens: 64 },
      }),
  })
  .openapi("CreateBatchRequest", {
    description: "OpenAI's form: a batch over an uploaded JSONL file.",
    example: { input_file_id: "file-3c9d1e2f4a5b6c7d8e9f0a1b", endpoint: "/v1/chat/completions", completion_window: "24h" },
  });
export type CreateBatchBody = z.infer<typeof CreateBatchBody>;

/**
 * The inline form: the pipeline's schema of the items, with the same batch options
 * (completion_window, metadata) validated as in the file form.
 */
export const InlineBatchRequest = InlineBatchBodySchema.safeExtend({
  completion_window: CompletionWindow,
  metadata: MetadataParam,
  output_expires_after: expiresAfter("output_expires_after"),
}).openapi("InlineBatchRequest", {
  description:
    "The inline form: prompts in the body. Items are {prompt} (completions), {messages} (chat) or {input} (embeddings); " +
    "top-level sampling fields apply to every item.",
  example: { model: "stories260K", input: [{ prompt: "What is 2+2?" }, { prompt: "Hello world" }], max_tokens: 50 },
});
export type InlineBatchRequest = z.infer<typeof InlineBatchRequest>;

/**
 * Which form a POST /v1/batches body is: inline when it carries `input` and no `input_file_id`.
 * A non-array `input` still counts as inline, so the client hears what is wrong with its items
 * rather than that input_file_id is missing.
 */
export function isInlineBatchBody(body: unknown): boolean {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return false;
  const b = body as Record<string, unknown>;
  return b.input !== undefined && b.input_file_id === undefined;
}

/** POST /v1/batches/pause and /resume (our extension): whose batches, at least one of a key and a model. */
export const PauseManyBody = z
  .strictObject(
    {
      api_key_id: z
        .string({ error: "api_key_id must be a key's id" })
        .optional()
        .openapi({ description: "That key's batches (another key's: admin keys only)." }),
      model: z.string({ error: "model must be a model's name" }).optional().openapi({ description: "Batches of this model." }),
    },
    unknownFields("request argument supplied"),
  )
  .refine((b) => b.api_key_id !== undefined || b.model !== undefined, {
    message: "name the batches to change: api_key_id, model, or both",
  })
  .openapi("PauseManyBody");

/** POST /v1/batches/{batch_id}/retry (our extension): which failed lines the new batch takes; an empty body takes all. */
export const RetryBatchBody = z
  .strictObject(
    {
      codes: z
        .array(z.string({ error: "codes must be an array of error codes" }).min(1, "codes must not hold an empty string"), {
          error: "codes must be an array of error codes",
        })
        .min(1, "codes must name at least one error code")
        .max(100, "codes may name at most 100 error codes")
        .optional()
        .openapi({
          description: "Only lines with one of these error codes (e.g. `server_error`, `context_length_exceeded`, `batch_cancelled`).",
        }),
      include_cancelled: z
        .boolean({ error: "include_cancelled must be true or false" })
        .optional()
        .openapi({ description: "Lines a cancel left unrun (`batch_cancelled`). Default true." }),
      include_expired: z
        .boolean({ error: "include_expired must be true or false" })
        .optional()
        .openapi({ description: "Lines an expiry left unrun (`batch_expired`). Default true." }),
    },
    unknownFields("request argument supplied"),
  )
  .openapi("RetryBatchRequest", { example: { codes: ["server_error"], include_cancelled: true } });

// --- /v1/uploads ---

export const UPLOAD_ID_PATTERN = /^upload_[A-Za-z0-9]{24}$/;

export const CreateUploadBody = z
  .strictObject(
    {
      bytes: z.number({ error: "bytes must be a number" }).int("bytes must be a whole number").min(1, "bytes must be at least 1"),
      filename: z.string({ error: "filename must be a string" }).min(1, "filename must not be empty").max(255),
      mime_type: z.string({ error: "mime_type must be a string" }).min(1).max(255),
      purpose: z.string({ error: "purpose must be a string" }),
      expires_after: expiresAfter("expires_after"),
    },
    unknownFields("request argument supplied"),
  )
  .openapi("CreateUploadRequest", {
    example: { bytes: 2147483, filename: "requests.jsonl", mime_type: "application/jsonl", purpose: "batch" },
  });

export const CompleteUploadBody = z
  .strictObject(
    {
      part_ids: z
        .array(z.string({ error: "part_ids must be part ids" }), { error: "part_ids must be an array of part ids" })
        .min(1, "part_ids must name at least one part")
        .max(10_000),
      md5: z
        .string({ error: "md5 must be a string" })
        .regex(/^[0-9a-fA-F]{32}$/, "md5 must be 32 hex digits")
        .optional(),
    },
    unknownFields("request argument supplied"),
  )
  .openapi("CompleteUploadRequest");

export const UploadIdParams = z.object({ upload_id: z.string().openapi({ example: "upload_5d1f0c2e9b7d4e3f8a5b1c0d" }) });
