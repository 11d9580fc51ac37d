// A new Batch object from its validation: what every control plane (one process or many) creates alike.
import type { ModelRegistry } from "../backends/registry.js";
import { ENDPOINTS, type Endpoint, isEndpoint } from "../openai/backend.js";
import type { ValidationResult } from "../pipeline/types.js";
import { transition } from "./batch-state.js";
import { InvalidRequestError, NotFoundError } from "./errors.js";
import type { Batch, BatchEndpoint } from "./objects.js";

/** The endpoint a batch names, if every backend serves it; a batch for another is refused at creation. */
export function servedEndpoint(endpoint: string): Endpoint {
  if (isEndpoint(endpoint)) return endpoint;
  throw new InvalidRequestError(
    `This deployment serves ${ENDPOINTS.join(", ")}; a batch for '${endpoint}' cannot run here.`,
    "unsupported_value",
    "endpoint",
  );
}

/** The input file a batch names: found for this owner, and uploaded for batches. */
export function checkInputFile<F extends { object: { purpose: string } }>(file: F | undefined, id: string): F {
  if (!file) throw new NotFoundError("file", id, "input_file_id");
  if (file.object.purpose !== "batch") {
    throw new InvalidRequestError(
      `File '${id}' has purpose '${file.object.purpose}'; a batch needs a file uploaded with purpose 'batch'.`,
      "invalid_request",
      "input_file_id",
    );
  }
  return file;
}

/**
 * The batch as accepted: "validating" (queued) when its file passed and its model is served, else "failed" with
 * the lines at fault in `errors`.
 */
export function newBatchObject(a: {
  id: string;
  endpoint: BatchEndpoint;
  completion_window: string;
  metadata?: Record<string, string> | null;
  default_params?: Record<string, unknown>;
  inputFileId: string;
  created: number;
  windowSeconds: number;
  validation: ValidationResult;
  registry: ModelRegistry;
}): Batch {
  let v = a.validation;
  // The model is chosen by the name the lines give, whatever else is wrong with the file.
  const served = v.ok || v.model !== undefined ? a.registry.resolve(v.model) : undefined;
  if (v.ok && !served) v = { ...v, ok: false, errorCount: 1, errors: [modelNotFound(v.model, v.modelLine, a.registry)] };
  v = unservedModel(v, a.registry);
  const deadline = a.created + a.windowSeconds;
  const batch: Batch = {
    id: a.id,
    object: "batch",
    endpoint: a.endpoint,
    // What serves it (the served model's name, as its response bodies say); a batch that failed before a model
    // could be chosen reports the name its lines asked for, or "" when it never got to read one.
    model: served?.name ?? v.model ?? "",
    errors: null,
    input_file_id: a.inputFileId,
    completion_window: a.completion_window,
    status: "validating",
    output_file_id: null,
    error_file_id: null,
    created_at: a.created,
    in_progress_at: null,
    expires_at: deadline,
    finalizing_at: null,
    completed_at: null,
    failed_at: null,
    expired_at: null,
    cancelling_at: null,
    cancelled_at: null,
    // As OpenAI reports it, a file that failed validation runs no request: its counts are all 0, so
    // completed + failed == total holds for every batch. The lines at fault are in `errors`.
    request_counts: { completed: 0, failed: 0, total: v.ok ? v.total : 0 },
    cached_lines: 0,
    usage: {
      input_tokens: 0,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 0,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 0,
    },
    metadata: a.metadata ?? null,
    ...(a.default_params ? { default_params: a.default_params } : {}),
    submitted_at: a.created,
    deadline_at: deadline,
    deadline_met: null,
    paused_at: null,
    pool: null,
    engine_seconds: { spot: 0, dedicated: 0 },
  };
  if (!v.ok) {
    batch.errors = { object: "list", data: validationErrors(v) };
    transition(batch, "failed", a.created);
  }
  return batch;
}

function modelNotFound(model: string | undefined, line: number | undefined, registry: ModelRegistry): ValidationResult["errors"][number] {
  const named = model === undefined ? "The requests name no model" : `The model '${model}' is not served here`;
  return {
    code: "model_not_found",
    message: `${named}; the models served are: ${registry.models.map((m) => m.name).join(", ") || "none (no live worker serves one)"}.`,
    line: line ?? 1,
    param: "body.model",
  };
}

/**
 * A model the lines name that is not served here: where lines may name several models, each must be served; where
 * they must name one, a misspelt name beside a served one (an adapter beside its base) is what is wrong, so
 * model_not_found says so in place of the mismatch.
 */
function unservedModel(v: ValidationResult, registry: ModelRegistry): ValidationResult {
  const unknown = v.models?.find((m) => !registry.resolve(m.model));
  if (!unknown) return v;
  const notFound = modelNotFound(unknown.model, unknown.line, registry);
  if (v.ok) return { ...v, ok: false, errorCount: 1, errors: [notFound] };
  const kept = v.errors.filter((e) => e.code !== "mismatched_model");
  if (kept.length === v.errors.length) return v;
  return { ...v, errors: [notFound, ...kept], errorCount: v.errorCount - (v.errors.length - kept.length) + 1 };
}

function validationErrors(v: ValidationResult): NonNullable<Batch["errors"]>["data"] {
  const data = v.errors.map((e) => ({ code: e.code, message: e.message, line: e.line, param: e.param ?? null }));
  const unlisted = v.errorCount - v.errors.length;
  if (unlisted > 0)
    data.push({ code: "too_many_errors", message: `${unlisted} more problems were found and not listed.`, line: null, param: null });
  return data;
}
