// What the control plane and its stores refuse, in their own terms: no HTTP statuses here. The HTTP layer
// (api/http/error-handler.ts) maps each to its OpenAI-shaped answer; a worker on another machine, or the
// offline runner, can read them without knowing HTTP.

export { StorageUnavailableError, storageUnavailable } from "../stores/errors.js";

/** The parent of every refusal the control plane explains to its caller. */
export class ControlError extends Error {
  constructor(
    message: string,
    /** OpenAI's machine-readable code, e.g. "not_found". */
    readonly code: string,
    /** The request field at fault, if one is. */
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** No such object, or one the caller may not see. */
export class NotFoundError extends ControlError {
  constructor(what: string, id: string, param: string | null = null) {
    super(`No ${what} found with id '${id}'.`, "not_found", param);
  }
}

/** What was asked for existed, but has been deleted or has expired (answered as a 404 that says so). */
export class GoneError extends ControlError {}

/** A request names a model this service does not serve (OpenAI's 404 model_not_found). */
export class ModelNotFoundError extends ControlError {
  constructor(model: string, served: readonly string[]) {
    super(
      `The model '${model}' does not exist here; this service serves ${served.map((m) => `'${m}'`).join(", ")}.`,
      "model_not_found",
      "model",
    );
  }
}

/** The request asks for something that cannot be: a bad value, a file of the wrong purpose. */
export class InvalidRequestError extends ControlError {}

/**
 * Not now: the queue is full, the service is draining, or what it keeps its state in cannot be reached. Retrying
 * after `retryAfterSeconds` can succeed.
 */
export class UnavailableError extends ControlError {
  constructor(
    message: string,
    code:
      | "queue_full"
      | "resource_unavailable"
      | "token_limit_exceeded"
      | "backend_unavailable"
      | "shutting_down"
      | "database_unavailable"
      | "storage_unavailable"
      | "no_worker_live",
    readonly retryAfterSeconds: number,
    options?: { cause?: unknown },
  ) {
    super(message, code);
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

/** The database did not answer (down, restarting, cut off): whether a write under way landed is unknown. */
export const databaseUnavailable = (cause?: unknown) =>
  new UnavailableError("The service cannot reach its database right now; retry shortly.", "database_unavailable", 5, { cause });

/** An API server with no models of its own names batches by its live workers' models, and none is live. */
export const noWorkerLive = (retryAfterSeconds: number) =>
  new UnavailableError(
    "No worker is live: this API server names batches by the models its workers serve, and none has announced itself yet; retry shortly.",
    "no_worker_live",
    retryAfterSeconds,
  );

/** Why a key's batch finds the queue full: what fills its places, and whose (queueFull). */
export interface QueueFullness {
  held: number;
  max: number;
  keys: number;
  /** The other keys' batches waiting. */
  others: number;
}

/** The queue is full (`full`: what fills it), or (`share`) the asking key holds its share while other keys' batches wait. */
export const queueFull = (retryAfterSeconds: number, share?: { held: number; max: number; keys: number }, full?: QueueFullness) =>
  new UnavailableError(
    share
      ? `The batch queue holds this key's share of it: ${share.held} of its ${share.max} places, while ${share.keys} keys have ` +
          "batches waiting; another key's batch is still admitted. Retry once some of this key's batches have started."
      : full
        ? fullQueue(full)
        : "The batch queue is full; retry later.",
    "queue_full",
    retryAfterSeconds,
  );

/** A full queue said as the share rule sees it: this key under its share, the rest of the places other keys'. */
function fullQueue(f: QueueFullness): string {
  if (f.keys === 1)
    return `The batch queue is full: this key's own ${f.held} batches waiting to start fill its ${f.max} places. Retry once some have started.`;
  const share = Math.ceil(f.max / f.keys);
  return (
    `The batch queue is full: of its ${f.max} places, this key's batches hold ${f.held}, under its share of ${share} while ` +
    `${f.keys} keys have batches waiting, and other keys' batches hold ${f.others}. A key at its share is refused more while ` +
    "others wait, so a place freed (a batch starting) goes to a key under its share, this one among them: retry shortly."
  );
}

/** Bytes past its key's file storage bound: OpenAI's 400 for an organization past its storage, per key. */
export const storageQuotaExceeded = (limit: number, stored: number, adding: number) =>
  new InvalidRequestError(
    `You have exceeded your file storage quota: this API key's files are limited to ${limit.toLocaleString("en-US")} bytes ` +
      `(stored: ${stored.toLocaleString("en-US")}; this request: ${adding.toLocaleString("en-US")}). ` +
      "Please delete old files or attempt with a smaller file size.",
    "storage_quota_exceeded",
    null,
  );

/** The service stops: refusing a new batch or request, or ending a request it was running (`stopped`). */
export const shuttingDown = (retryAfterSeconds: number, what: "batches" | "requests" | "stopped" = "batches") =>
  new UnavailableError(
    what === "stopped"
      ? "The service is shutting down and stopped this request before it ended; retry shortly."
      : `The service is shutting down and accepts no new ${what}; retry shortly.`,
    "shutting_down",
    retryAfterSeconds,
  );

/** A synchronous request would take its key's enqueued tokens on the model past the key's limit. */
export const syncTokenLimit = (model: string, limit: number, enqueued: number, requested: number) =>
  new UnavailableError(
    `Enqueued token limit reached for ${model}. Limit: ${limit} enqueued tokens (already enqueued by this key's open ` +
      `batches and running requests: ${enqueued}; this request: ${requested}). Retry once some finish.`,
    "token_limit_exceeded",
    5,
  );

/** A synchronous request's lane is full (OpenAI's flex answer when capacity is short: 429 resource_unavailable). */
export const laneFull = (tier: string, retryAfterSeconds: number) =>
  new UnavailableError(
    `Too many ${tier}-tier requests are waiting for this model right now; retry after ${retryAfterSeconds} s, or submit the work as a batch.`,
    "resource_unavailable",
    retryAfterSeconds,
  );
