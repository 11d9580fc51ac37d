// Usage and costs per key in the shapes of OpenAI's organization Usage and Costs APIs, from the batches' committed
// usage: each batch that ended is one record (kept when the batch is deleted), counted in the bucket where it
// ended, so the figures add up exactly to the batches' `usage`. Synchronous requests add records of their own, one
// per key, model, endpoint and tier each minute (`batch: false`). A batch over several models is reported as each
// model's share of it (its `usage_by_model`).
import type { ModelRegistry } from "../backends/registry.js";
import { READS_ONLY } from "../openai/backend.js";
import { endedAt, isFinal } from "./batch-state.js";
import { workCost } from "./cost.js";
import { InvalidRequestError } from "./errors.js";
import type { Batch } from "./objects.js";
import type { Owner } from "./ports.js";
import type { ServedTier } from "./sync-inference.js";

export interface UsageRecord {
  /** The batch's id; for synchronous requests, their minute's record's (sync_…). */
  batchId: string;
  owner: Owner;
  model: string;
  endpoint: string;
  /** Unix seconds the batch ended. */
  endedAt: number;
  /** Requests answered (the batch's completed count). */
  requests: number;
  usage: Batch["usage"];
  engine_seconds: Batch["engine_seconds"];
  /** Absent for a batch; false for synchronous requests, with the tier that served them. */
  batch?: false;
  serviceTier?: ServedTier;
  /** A batch over several models: each model's share (the record's own figures are their sums). */
  byModel?: Array<Pick<UsageRecord, "model" | "requests" | "usage" | "engine_seconds">>;
}

/** A batch's usage record once it has ended (undefined before). */
export function usageRecordOf(batch: Batch, owner: Owner): UsageRecord | undefined {
  const ended = endedAt(batch);
  if (!isFinal(batch.status) || ended === null) return undefined;
  return {
    batchId: batch.id,
    owner,
    model: batch.model ?? "",
    endpoint: batch.endpoint,
    endedAt: ended,
    requests: batch.request_counts.completed,
    usage: batch.usage,
    engine_seconds: batch.engine_seconds,
    ...(batch.usage_by_model && {
      byModel: Object.entries(batch.usage_by_model).map(([model, m]) => ({
        model,
        requests: m.request_counts.completed,
        usage: m.usage,
        engine_seconds: m.engine_seconds,
      })),
    }),
  };
}

/** The records as the usage API counts them: a batch over several models as one record per model. */
const perModel = (r: UsageRecord): UsageRecord[] =>
  r.byModel
    ? r.byModel.map(({ model, requests, usage, engine_seconds }) => ({ ...r, model, requests, usage, engine_seconds, byModel: undefined }))
    : [r];

export type UsageKind = "completions" | "embeddings" | "costs";

export type UsageParam = "start_time" | "end_time" | "bucket_width" | "group_by" | "models" | "api_key_ids" | "batch" | "limit" | "page";

const WIDTHS = { "1m": 60, "1h": 3600, "1d": 86400 } as const;
/** OpenAI's defaults and maxima of buckets per page. */
const LIMITS = { "1m": [60, 1440], "1h": [24, 168], "1d": [7, 31] } as const;
const COSTS_LIMITS = [7, 180] as const;
export const USAGE_GROUPS: Record<UsageKind, readonly string[]> = {
  completions: ["project_id", "user_id", "api_key_id", "model", "batch", "service_tier"],
  embeddings: ["project_id", "user_id", "api_key_id", "model"],
  costs: ["project_id", "line_item", "api_key_id"],
};
/** The query parameters each usage route takes (its OpenAPI parameters are written from these). */
export const USAGE_PARAMS: Record<UsageKind, readonly UsageParam[]> = {
  completions: ["start_time", "end_time", "bucket_width", "group_by", "models", "api_key_ids", "batch", "limit", "page"],
  embeddings: ["start_time", "end_time", "bucket_width", "group_by", "models", "api_key_ids", "limit", "page"],
  costs: ["start_time", "end_time", "bucket_width", "group_by", "models", "api_key_ids", "limit", "page"],
};

export interface UsageQuery {
  kind: UsageKind;
  start: number;
  end: number;
  width: number;
  groupBy: string[];
  models?: string[];
  apiKeyIds?: string[];
  batch?: boolean;
  limit: number;
}

const bad = (message: string, param: string) => new InvalidRequestError(message, "invalid_request", param);

/** A query string's parameters (as Express parses them: a string, or an array where repeated) checked into a query. */
export function parseUsageQuery(kind: UsageKind, raw: Record<string, unknown>, now: number): UsageQuery {
  const q: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw)) {
    const name = k.endsWith("[]") ? k.slice(0, -2) : k;
    if (!(USAGE_PARAMS[kind] as readonly string[]).includes(name))
      throw bad(`Unknown parameter: '${name}'. This endpoint takes ${USAGE_PARAMS[kind].join(", ")}.`, name);
    q[name] = v;
  }
  const int = (name: string, v: unknown, min: number) => {
    const n = typeof v === "string" && /^\d+$/.test(v) ? Number(v) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min) throw bad(`'${name}' must be a whole number (unix seconds for times) >= ${min}.`, name);
    return n;
  };
  const list = (name: string): string[] | undefined => {
    const v = q[name];
    if (v === undefined) return undefined;
    const items = (Array.isArray(v) ? v : [v]).flatMap((x) => String(x).split(",")).map((x) => x.trim());
    if (items.some((x) => x === "")) throw bad(`'${name}' must list non-empty values.`, name);
    return items;
  };
  if (q.start_time === undefined) throw bad("Missing required parameter: 'start_time' (unix seconds).", "start_time");
  const start = int("start_time", q.start_time, 0);
  // By default up to now, this second included (end_time is exclusive).
  const end = q.end_time === undefined ? Math.max(now + 1, start + 1) : int("end_time", q.end_time, 0);
  if (end <= start) throw bad("'end_time' must be after 'start_time'.", "end_time");
  const widthName = String(q.bucket_width ?? "1d");
  if (!(widthName in WIDTHS)) throw bad("'bucket_width' must be one of 1m, 1h, 1d.", "bucket_width");
  const w = widthName as keyof typeof WIDTHS;
  const groupBy = list("group_by") ?? [];
  const unknownGroup = groupBy.find((g) => !USAGE_GROUPS[kind].includes(g));
  if (unknownGroup) throw bad(`'group_by' may name ${USAGE_GROUPS[kind].join(", ")}; not '${unknownGroup}'.`, "group_by");
  const [byDefault, max] = kind === "costs" ? COSTS_LIMITS : LIMITS[w];
  const limit = q.limit === undefined ? byDefault : int("limit", q.limit, 1);
  if (limit > max) throw bad(`'limit' may be at most ${max} buckets for bucket_width=${widthName}.`, "limit");
  let batch: boolean | undefined;
  if (q.batch !== undefined) {
    if (q.batch !== "true" && q.batch !== "false") throw bad("'batch' must be true or false.", "batch");
    batch = q.batch === "true";
  }
  let from = start;
  if (q.page !== undefined) {
    const m = /^page_(\d+)$/.exec(Buffer.from(String(q.page), "base64url").toString());
    from = m ? Number(m[1]) : Number.NaN;
    if (!Number.isSafeInteger(from) || from < start || from >= end || (from - start) % WIDTHS[w] !== 0)
      throw bad("'page' is not a cursor this query returned.", "page");
  }
  return { kind, start: from, end, width: WIDTHS[w], groupBy, models: list("models"), apiKeyIds: list("api_key_ids"), batch, limit };
}

export interface UsageBucket {
  object: "bucket";
  start_time: number;
  end_time: number;
  results: Array<Record<string, unknown>>;
}

export interface UsagePage {
  object: "page";
  data: UsageBucket[];
  has_more: boolean;
  next_page: string | null;
}

/** The usage API's embeddings bucket holds every line that generates nothing: embeddings, and rerank and score. */
const readsOnly = (endpoint: string) => (READS_ONLY as readonly string[]).includes(endpoint);

/**
 * The page of buckets the query asks for from the records (those that ended in the query's range; `idOf` names
 * each owner's key). Costs price each record at its model's price now, as a batch's `cost` is shown.
 */
export function usagePage(
  records: readonly UsageRecord[],
  q: UsageQuery,
  idOf: (o: Owner) => string | null,
  registry: ModelRegistry,
): UsagePage {
  const buckets = Math.ceil((q.end - q.start) / q.width);
  const shown = Math.min(buckets, q.limit);
  const data: UsageBucket[] = [];
  // A model may be asked for by an alias; the records name it by its name.
  const models = q.models?.map((n) => registry.models.find((m) => m.name === n || m.aliases.includes(n))?.name ?? n);
  const wanted = records.flatMap(perModel).filter(
    (r) =>
      // What a model without a price did costs nothing: no cost result.
      (q.kind === "costs" ? registry.get(r.model)?.price !== undefined : (q.kind === "embeddings") === readsOnly(r.endpoint)) &&
      (q.batch === undefined || q.batch === (r.batch !== false)) &&
      (!models || models.includes(r.model)) &&
      (!q.apiKeyIds || q.apiKeyIds.includes(idOf(r.owner) ?? "")),
  );
  for (let i = 0; i < shown; i++) {
    const from = q.start + i * q.width;
    const to = from + q.width;
    const inBucket = wanted.filter((r) => r.endedAt >= from && r.endedAt < Math.min(to, q.end));
    data.push({ object: "bucket", start_time: from, end_time: to, results: results(inBucket, q, idOf, registry) });
  }
  const next = q.start + shown * q.width;
  const hasMore = shown < buckets;
  return { object: "page", data, has_more: hasMore, next_page: hasMore ? Buffer.from(`page_${next}`).toString("base64url") : null };
}

function results(records: UsageRecord[], q: UsageQuery, idOf: (o: Owner) => string | null, registry: ModelRegistry) {
  const by = (g: string, r: UsageRecord): unknown =>
    !q.groupBy.includes(g)
      ? null
      : g === "api_key_id"
        ? idOf(r.owner)
        : g === "model" || g === "line_item"
          ? r.model
          : g === "batch"
            ? r.batch !== false
            : g === "service_tier"
              ? (r.serviceTier ?? "batch")
              : null;
  const groups = new Map<string, UsageRecord[]>();
  for (const r of records) {
    // Costs in two currencies are never one sum: each currency is a result of its own.
    const currency = q.kind === "costs" ? registry.get(r.model)?.price?.currency : undefined;
    const k = JSON.stringify([...["api_key_id", "model", "line_item", "batch", "service_tier"].map((g) => by(g, r)), currency]);
    groups.set(k, [...(groups.get(k) ?? []), r]);
  }
  return [...groups.keys()].sort().map((k) => {
    const rs = groups.get(k)!;
    const sum = (f: (r: UsageRecord) => number) => rs.reduce((n, r) => n + f(r), 0);
    const first = rs[0];
    if (q.kind === "costs") return costResult(rs, registry, by("api_key_id", first), by("line_item", first));
    const common = {
      input_tokens: sum((r) => r.usage.input_tokens),
      num_model_requests: sum((r) => r.requests),
      project_id: null,
      user_id: null,
      api_key_id: by("api_key_id", first),
      model: by("model", first),
    };
    if (q.kind === "embeddings") return { object: "organization.usage.embeddings.result", ...common };
    return {
      object: "organization.usage.completions.result",
      ...common,
      output_tokens: sum((r) => r.usage.output_tokens),
      input_cached_tokens: sum((r) => r.usage.input_tokens_details.cached_tokens),
      input_audio_tokens: 0,
      output_audio_tokens: 0,
      batch: by("batch", first),
      service_tier: by("service_tier", first),
    };
  });
}

/** One cost result: the records (of one currency) priced one by one, summed. */
function costResult(records: UsageRecord[], registry: ModelRegistry, apiKeyId: unknown, lineItem: unknown) {
  let value = 0;
  let currency = "usd";
  for (const r of records) {
    const cost = workCost(r.model, r, registry, r.serviceTier);
    if (!cost) continue;
    value += cost.amount;
    currency = cost.currency.toLowerCase();
  }
  return {
    object: "organization.costs.result",
    amount: { value: Math.round(value * 1e6) / 1e6, currency },
    line_item: lineItem,
    project_id: null,
    api_key_id: apiKeyId,
  };
}

/** A key as admins list it: its properties and what it has enqueued now; never its secret or hash. */
export interface KeyView {
  object: "organization.api_key";
  id: string;
  admin: boolean;
  weight: number;
  enqueued_token_limits: Record<string, number>;
  /** Its open batches' estimated tokens, by model. */
  enqueued_tokens: Record<string, number>;
}

/** What admin keys read of the whole deployment: usage and costs per key, and the keys. */
export interface Organization {
  /** One page of buckets, from the query string as received (checked here: InvalidRequestError naming the parameter). */
  usage(kind: UsageKind, query: Record<string, unknown>): Promise<UsagePage>;
  keys(): Promise<KeyView[]>;
  /** The id of the key that owns these objects (null: no key). */
  keyId(owner: Owner): string | null;
  /** The owner whose key has this id, if any. */
  ownerOf(keyId: string): Owner | undefined;
}
