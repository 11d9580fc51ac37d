// Every error code the service answers with, in one place: where it appears, its HTTP status and OpenAI type, when
// it happens, and what the client should do. docs/errors.md is written from it (npm run docs:errors), and
// tests/openai/error-catalogue.unit.test.ts fails when the code raises a code this lacks.

/**
 * Where a code appears: `http`, an error answer ({"error": {...}}); `batch`, the batch object's `errors` (the batch
 * failed or stopped as a whole); `line`, a line's entry in the error file, which a synchronous request of the same
 * body gets as a 400 (or, retryable, as a 503 `backend_unavailable`).
 */
export type ErrorPlace = "http" | "batch" | "line";

/** What the client should do: retry (after Retry-After where given), fix the request, or nothing can help. */
export type ErrorAction = "retry" | "fix" | "none";

export interface CatalogueEntry {
  places: readonly ErrorPlace[];
  /** The HTTP status of an `http` answer. */
  status?: number;
  /** OpenAI's error `type` of an `http` answer. */
  type?: "invalid_request_error" | "permission_error" | "rate_limit_error" | "server_error";
  when: string;
  action: ErrorAction;
  /** How to act, where "retry" or "fix" alone does not say it. */
  how?: string;
}

const request = { places: ["http"], status: 400, type: "invalid_request_error", action: "fix" } as const;
/** A line's refusal, which a synchronous request of the same body gets as a 400 answer. */
const lineAndSync = { places: ["http", "line"], status: 400, type: "invalid_request_error", action: "fix" } as const;
const notNow = (status: number) => ({ places: ["http"], status, type: "server_error", action: "retry" }) as const;
const tooMany = { places: ["http"], status: 429, type: "rate_limit_error", action: "retry" } as const;

export const ERROR_CATALOGUE = {
  // Requests the service refuses as sent.
  invalid_request: {
    ...request,
    places: ["http", "line"],
    when: "A body or a line's body breaks a rule of its endpoint; `param` names the field.",
  },
  invalid_json: { ...request, when: "The request body is not valid JSON." },
  nesting_too_deep: {
    ...request,
    places: ["http", "line"],
    when: "A body (or a line's body) nests objects and arrays more than 64 levels deep; `param` names its top field (`response_format`, `tools`, `messages`).",
  },
  invalid_type: { ...request, when: "A field of a synchronous request has the wrong type (`stream`, `stream_options`)." },
  invalid_value: { ...request, when: "A value is out of its range (`default_params`)." },
  unknown_parameter: {
    ...request,
    when: "A synchronous request's `stream_options` has an option other than `include_usage` and `include_obfuscation`.",
  },
  missing_required_parameter: {
    ...lineAndSync,
    when: "A required field is absent (a chat body's `messages`, Anthropic's `max_tokens`, a tool's `input_schema`, a batch create's `input_file_id`, an upload's `purpose`); `param` names it.",
  },
  unsupported_parameter: {
    ...lineAndSync,
    when: "The line asks for something its backend cannot honour (tools on a model whose template has no call format); `param` names it.",
  },
  unsupported_value: {
    ...request,
    places: ["http", "line"],
    when: "A field's value is one the service does not serve (an upload's `purpose`, `stream: true` on an endpoint that answers whole).",
  },
  invalid_url: {
    ...request,
    places: ["http", "line"],
    when: "A line's `url` is not an endpoint a batch can target, or its model's backend does not serve it.",
  },
  invalid_metadata: {
    ...request,
    when: "A stop rule in the batch's `metadata` is malformed, `max_cost` names a model with no price, or `cache` is neither `on` nor `off`.",
  },
  invalid_input_file: {
    ...request,
    when: "A batch's plan (`POST /v1/batches/plan`) names a file a create would take and fail at once; the message names its first fault and how many more there are.",
    how: "Fix the file (its faults are those a created batch's `errors` would list) and upload it again.",
  },
  invalid_multipart: { ...request, when: "A multipart upload is malformed (a part too large or too many fields)." },
  invalid_api_key_id: { ...request, when: "An admin's `api_key_id` filter (or `DELETE /v1/cache`'s) names no key of the keys file." },
  result_cache_off: {
    ...request,
    when: "`DELETE /v1/cache` on a deployment whose result cache is off (`RESULT_CACHE=off`): it remembers nothing to purge.",
  },
  invalid_dataset: { ...request, when: "A dataset batch's table cannot be read, or its template names a column it lacks." },
  invalid_dataset_job: { ...request, when: "A dataset batch's job fields are malformed." },
  request_too_large: {
    ...request,
    status: 413,
    when: "A JSON body is larger than its route takes; a large input belongs in a file upload.",
  },
  storage_quota_exceeded: {
    ...request,
    when: "Bytes stored for a key (an upload or one of its parts, an inline or Anthropic batch's lines, a retry's or a dataset job's files) would take what it holds past the keys file's `file_storage_limit_bytes` (10 GiB unless set); deleted and expired files, and uploads completed, cancelled or expired, count no more.",
    how: "Delete files you no longer need (or let them expire), or send less.",
  },
  file_too_large: { ...request, status: 413, when: "An uploaded file is larger than `MAX_FILE_BYTES`." },
  unsupported_media_type: {
    ...request,
    status: 415,
    when: "A body that is not `application/json` (or not `multipart/form-data` on a route that takes a file: `/v1/files`, an upload's parts).",
  },
  unsupported_encoding: { ...request, status: 415, when: "The body's content encoding or charset is not one the server reads." },
  headers_too_large: { ...request, status: 431, when: "The request's headers are too large." },
  bad_http_request: { ...request, when: "The request is not valid HTTP." },
  request_timeout: { ...request, status: 408, action: "retry", when: "The request or its headers did not arrive in time." },
  unknown_url: { ...request, status: 404, when: "No route has this method and path (OpenAI's `Invalid URL`)." },
  not_found: { ...request, status: 404, when: "No file, batch or upload has this id, or it belongs to another key." },
  model_not_found: {
    ...request,
    places: ["http", "batch", "line"],
    status: 404,
    when: "The model is not one this service serves (a batch whose lines name one fails with it); on a line, its model stopped being served while the batch waited (taken out of the models file).",
  },
  results_not_ready: {
    ...request,
    status: 404,
    action: "retry",
    how: "Poll the batch; results exist once a line has run.",
    when: "A batch's results are asked for before any exist.",
  },
  output_gone: {
    ...request,
    status: 404,
    action: "none",
    how: "Nothing brings them back: run the lines again as a new batch (its error file, if any, is still there).",
    when: "An ended batch's results or output are asked for once its output file has been deleted or has expired.",
  },
  batch_not_finished: { ...request, when: "A retry or a table is asked of a batch that has not ended." },
  batch_not_running: { ...request, when: "Pause or resume is asked of a batch that has ended or is ending." },
  batch_not_run: { ...request, when: "A table is asked of a dataset batch that ended before its lines ran." },
  not_a_dataset_batch: { ...request, when: "A table is asked of a batch that was not made from a dataset." },
  nothing_to_retry: { ...request, action: "none", when: "A retry is asked of a batch with no failed line (or none matching the filter)." },
  input_gone: {
    ...request,
    action: "none",
    how: "Submit the lines again as a new batch (a dataset batch's answers stay in its output file while it is kept).",
    when: "A retry is asked of a batch whose input file has expired or been deleted, or a table of a dataset batch one of whose files (its dataset, its job, its output) has.",
  },
  upload_too_large: { ...request, when: "An upload's part would take its parts past the `bytes` the upload was created for." },
  upload_not_pending: { ...request, action: "none", when: "A part or a completion is sent to an upload that is completed or cancelled." },

  // Who may ask.
  invalid_api_key: {
    places: ["http"],
    status: 401,
    type: "invalid_request_error",
    action: "fix",
    when: "Keys are on and the request's key is not one of them. With no key at all the 401 has code null, as OpenAI's; both have OpenAI's type `invalid_request_error` (Anthropic's routes answer `authentication_error`).",
  },
  origin_not_allowed: {
    places: ["http"],
    status: 403,
    type: "permission_error",
    action: "fix",
    how: "Call from this service's own pages, from a client that is not a browser, or list the page's origin in `CORS_ORIGINS`.",
    when: "A browser sent a request that changes something (or its preflight) from a web page of another origin that `CORS_ORIGINS` does not list.",
  },
  host_not_allowed: {
    places: ["http"],
    status: 403,
    type: "permission_error",
    action: "fix",
    how: "Reach it as 127.0.0.1 or localhost, list the name's origin in `CORS_ORIGINS`, or set keys.",
    when: "An open API listening on loopback was reached by a name other than an address or localhost (a site's name pointed at this machine: DNS rebinding).",
  },
  insufficient_permissions: {
    places: ["http"],
    status: 403,
    type: "permission_error",
    action: "fix",
    when: "A route for admin keys is called with another key.",
  },

  // Not now: retry after Retry-After.
  queue_full: {
    ...tooMany,
    when: "`MAX_QUEUE_DEPTH` batches already wait, or the key holds its share of the queue while other keys' batches wait.",
  },
  resource_unavailable: {
    ...tooMany,
    when: "A synchronous lane's queue is full (the interactive lane: `Retry-After: 1`; flex: 10), or `DATASET_READS` dataset reads run and four times as many wait (`Retry-After: 10`).",
  },
  token_limit_exceeded: {
    ...tooMany,
    places: ["http", "batch"],
    how: "Wait for the key's open batches or requests to finish, or raise its limit.",
    when: "A batch or synchronous request would take its key's enqueued tokens on the model past the key's limit (a batch fails with it).",
  },
  shutting_down: {
    ...notNow(503),
    when: "The server is draining after SIGTERM and takes no new batch or request; another takes the work (a stream in flight past `SHUTDOWN_DRAIN_SECONDS` ends with it as an error event).",
  },
  model_not_ready: { ...notNow(503), when: "The model is still loading." },
  no_worker_live: {
    ...notNow(503),
    when: "An API server with no models of its own (neither `MODEL_PATH` nor `MODELS_FILE`) names a batch by the models its live workers serve, and no worker is live.",
  },
  starting: {
    ...notNow(503),
    when: "The process has just started: it holds its port already, but its model is still being downloaded (`GET /ready` shows each download's bytes, rate and time left), checked or loading, or (an API server) it is still reaching its database. `/health` answers 200 meanwhile, so a liveness probe leaves it be; `Retry-After` says when to ask again.",
  },
  backend_unavailable: {
    ...notNow(503),
    when: "A synchronous request's backend failed in a way worth retrying (the engine closed, an upstream down), or no worker serving its model answered.",
  },
  database_unavailable: {
    ...notNow(503),
    when: "The distributed mode cannot reach PostgreSQL; whether a write landed is unknown, so a retry is safe.",
  },
  storage_unavailable: {
    ...notNow(503),
    when: "The store of files and results (a folder or S3) does not answer, or the disk is read-only.",
  },
  storage_full: { ...notNow(507), when: "The disk under `BATCH_DIR` is full; nothing was stored." },
  storage_not_writable: {
    ...notNow(503),
    how: "Free space (or fix the disk): /ready answers 200 within 2 s; meanwhile a load balancer sends the work elsewhere.",
    when: "`/ready` while the disk under `BATCH_DIR` is full or read-only (`storage.state` says which): reads are served, writes refused.",
  },
  too_many_open_files: { ...notNow(503), when: "The process ran out of file descriptors; nothing was stored." },
  internal_error: {
    ...notNow(500),
    when: "An unexpected failure; its details are in the server's log under the request's `x-request-id`.",
  },

  // A batch's input file, checked before any line runs: the batch fails with these in its `errors`.
  empty_file: { places: ["batch"], action: "fix", when: "The input file has no request line." },
  unreadable_file: { places: ["batch"], action: "fix", when: "The input file cannot be read as UTF-8 JSONL." },
  invalid_json_line: { places: ["batch"], action: "fix", when: "A line is not a JSON object; `line` gives its number." },
  line_too_long: { places: ["batch"], action: "fix", when: "A line is longer than the limit (`MAX_LINE_BYTES`)." },
  too_many_requests: {
    places: ["batch"],
    action: "fix",
    how: "Split the file into batches of at most the limit.",
    when: "The file has more lines than a batch takes (`MAX_REQUESTS_PER_BATCH`, 50,000).",
  },
  invalid_custom_id: { places: ["batch"], action: "fix", when: "A line's `custom_id` is missing or not a string." },
  invalid_method: { places: ["batch"], action: "fix", when: "A line's `method` is not POST." },
  invalid_body: { places: ["batch"], action: "fix", when: "A line's `body` is missing or not an object." },
  duplicate_custom_id: { places: ["batch"], action: "fix", when: "Two lines share a `custom_id`." },
  mismatched_url: { places: ["batch"], action: "fix", when: "A line's `url` differs from the batch's `endpoint`." },
  mismatched_model: { places: ["batch"], action: "fix", when: "A line names another model than the batch's first line does." },
  too_many_errors: { places: ["batch"], action: "fix", when: "More problems were found than the batch lists; the entry counts the rest." },
  stop_rule: {
    places: ["batch"],
    action: "none",
    how: "Retry the batch's failed lines once the cause is fixed.",
    when: "A stop rule of the batch's `metadata` broke (an error rate, a cost); the lines not run fail with `batch_failed`.",
  },
  batch_failed: {
    places: ["batch", "line"],
    action: "retry",
    how: "Retry the batch's failed lines.",
    when: "The batch stopped (a stop rule, a run that could not go on) before this line ran.",
  },

  // A line that ran and failed (or never ran): its entry in the error file.
  batch_cancelled: {
    places: ["line"],
    action: "retry",
    how: "Retry the batch's failed lines.",
    when: "The batch was cancelled before this line ran.",
  },
  batch_expired: {
    places: ["line"],
    action: "retry",
    how: "Retry the batch's failed lines, with a longer window.",
    when: "The batch's completion window ended before this line ran.",
  },
  context_length_exceeded: {
    ...lineAndSync,
    when: "The prompt and `max_tokens` do not fit the model's context; `param` names the field (OpenAI's message).",
  },
  embeddings_unsupported: { ...lineAndSync, when: "The model cannot compute embeddings." },
  model_cannot_rank: { ...lineAndSync, when: "A rerank or score line names a model with no classification head." },
  engine_closed: {
    places: ["line"],
    action: "retry",
    when: "The engine closed while the line waited (the model was unloaded or the service stopped).",
  },
  engine_error: { places: ["line"], action: "retry", when: "The engine failed on the line natively; the sequence was wiped." },
  server_error: { places: ["line"], action: "retry", when: "The line failed in a way the service did not expect; its message says how." },
  upstream_timeout: {
    places: ["line"],
    action: "retry",
    when: "An upstream server did not answer within `timeout_seconds`, every attempt.",
  },
  upstream_unreachable: { places: ["line"], action: "retry", when: "An upstream server could not be reached, every attempt." },
  upstream_invalid_response: {
    places: ["line"],
    action: "retry",
    when: "An upstream server answered 2xx with a body that is not the endpoint's answer.",
  },
  upstream_error: {
    places: ["line"],
    action: "fix",
    how: "The line's entry carries the upstream's status and body; its own code is used where it gives one.",
    when: "An upstream server refused the line with a 4xx that has no code of its own.",
  },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

const PLACE: Record<ErrorPlace, string> = { http: "answer", batch: "batch `errors`", line: "error line" };
const ACTION: Record<ErrorAction, string> = { retry: "retry", fix: "fix the request", none: "retrying does not help" };

/** docs/errors.md's table, one row per code, in the catalogue's order. */
export function errorsTable(): string {
  const rows = Object.entries(ERROR_CATALOGUE).map(([code, e]: [string, CatalogueEntry]) => {
    const status = e.status ?? "—";
    const action = e.how ? `${ACTION[e.action]}. ${e.how}` : ACTION[e.action];
    return `| \`${code}\` | ${e.places.map((p) => PLACE[p]).join(", ")} | ${status} | ${e.type ?? "—"} | ${e.when} | ${action} |`;
  });
  return ["| code | where | status | type | when | what to do |", "|---|---|---|---|---|---|", ...rows].join("\n");
}
