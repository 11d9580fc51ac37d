// Admission: a batch's input validated as it streams in, the model's and the batch's defaults written into its own
// copy, its shards planned, and the batch recorded with them in one step against the queue's depth and its key's
// enqueued-token limits (a batch over them ends failed, as OpenAI's does), then announced to the workers.
import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { open, rm, stat } from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type pino from "pino";
import type { ModelRegistry } from "../backends/registry.js";
import type { KeyRing } from "../config/keys.js";
import { newBatchObject, servedEndpoint } from "../domain/batch-object.js";
import { parseCompletionWindow } from "../domain/completion-window.js";
import { checkDefaultParams, defaultsFor, withDefaults } from "../domain/default-params.js";
import { InvalidRequestError, NotFoundError, queueFull, shuttingDown } from "../domain/errors.js";
import { newBatchId } from "../domain/ids.js";
import type { Batch } from "../domain/objects.js";
import type { CreateBatchInput, Owner } from "../domain/ports.js";
import { stopRulesOf } from "../domain/stop-rules.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import { oneShard, planShards, type ShardPlan } from "../pipeline/shards.js";
import type { TokenCounter } from "../pipeline/token-estimate.js";
import { validateBatchFile } from "../pipeline/validate.js";
import { batchKeys } from "../state/blob-layout.js";
import { type BatchRecords, type EventBus, type FileRecords, TokenLimitReached, type WorkQueue } from "../state/ports.js";
import type { BlobStore } from "../stores/blob-store.js";
import { inDir } from "../stores/in-dir.js";
import { queueRoom } from "../tenancy/fair-share.js";
import { batchLimits, failOverLimit } from "../tenancy/key-limits.js";
import { checkCacheMetadata } from "./cache-metadata.js";
import type { PlanDeps } from "./plan.js";
import { type WebhookTargets, webhookEvent } from "./webhooks.js";

const QUEUE_FULL_RETRY_AFTER_SECONDS = 30;
/** Sent as Retry-After with a 503 while the process drains: a restart (or another API server) takes seconds. */
const SHUTDOWN_RETRY_AFTER_SECONDS = 5;

export interface ClusterBatchServiceDeps {
  limits: {
    /** Admit a batch only while fewer are queued (MAX_QUEUE_DEPTH). */
    maxQueueDepth: number;
    maxRequestsPerBatch: number;
    maxLineBytes: number;
    /** Requests per shard: SHARD_SIZE, or every request in one where one process runs a batch in place. */
    shardSize: number;
  };
  events: EventBus;
  batches: BatchRecords;
  queue: WorkQueue;
  files: FileRecords;
  blobs: BlobStore;
  registry: ModelRegistry;
  /**
   * The distributed mode's registry as its live workers serve it (served-models.ts): a batch naming a model none of
   * them serves fails at once, saying which are served. Absent: `registry` (one process serves all of it).
   */
  served?: { forBatch(): Promise<ModelRegistry> };
  /** The keys' properties: their enqueued-token limits (none: no limits). */
  keys?: KeyRing;
  /** Counts prompt tokens with the model's tokenizer where this process has it (else estimated from characters). */
  countTokens?: TokenCounter;
  /** Where ended batches' events go: a batch whose file fails validation ends at once. */
  webhooks?: WebhookTargets;
  /** Local scratch space for validating inputs. */
  scratchDir: string;
  logger: pino.Logger;
  now: () => number;
  metrics?: BatchMetrics;
  /** What a plan (plan.ts) reads beside the above: the backends up here, and the result cache's use. */
  planning?: Pick<PlanDeps, "backendOf" | "cacheOn" | "cacheScopeOf">;
  /**
   * Each batch keeps its own copy of its requests, <batch_id>/input.jsonl (one machine's layout): deleting the
   * upload can never touch a batch. Otherwise batches read their input file's content where it is.
   */
  ownInput?: boolean;
}

/** A batch to admit: the create's fields and where its input lies. */
export interface AdmitInput extends Omit<CreateBatchInput, "input_file_id"> {
  id?: string;
  inputFileId: string;
  inputKey: string;
  /** Lines may name several models (then `plan` holds the shards, one model each). */
  mixedModels?: boolean;
  plan?: ShardPlan[];
}

type Validation = Awaited<ReturnType<typeof validateBatchFile>>;

/**
 * A spend limit needs one figure for the batch's cost: refused where a model it names (of the several its lines may
 * name) has no price, or where their prices are in different currencies or bases (domain/cost.ts).
 */
function checkCostKnown(rules: ReturnType<typeof stopRulesOf>, batch: Batch, v: Validation, registry: ModelRegistry): void {
  if (rules.maxCost === undefined) return;
  const named = [batch.model, ...(v.models ?? []).map((m) => registry.resolve(m.model)?.name)].filter((m) => m !== undefined);
  const refuse = (why: string) => new InvalidRequestError(`Invalid 'metadata.max_cost': ${why}.`, "invalid_metadata", "metadata.max_cost");
  const unpriced = named.find((model) => !registry.get(model)?.price);
  if (unpriced) throw refuse(`the model '${unpriced}' has no price in the models file, so the batch's cost is unknown`);
  const kindOf = ({ currency, basis }: { currency: string; basis: string }) =>
    `${currency} per ${basis === "tokens" ? "token" : "pool hour"}`;
  const kinds = new Set(named.map((model) => kindOf(registry.get(model)!.price!)));
  if (kinds.size > 1) throw refuse(`its models are priced in ${[...kinds].join(" and ")}, so the batch's cost has no one figure`);
}

export class Admission {
  private closing = false;

  constructor(private readonly deps: ClusterBatchServiceDeps) {}

  /** From now on new batches are refused (503 with a retry delay): this process is stopping. */
  close(): void {
    this.closing = true;
  }

  /** Refuses a new batch while this process stops. */
  checkOpen(): void {
    if (this.closing) throw shuttingDown(SHUTDOWN_RETRY_AFTER_SECONDS);
  }

  /** Validates, plans and records the batch; a refusal (a full queue, a failing store) leaves none of it behind. */
  async admit(input: AdmitInput): Promise<Batch> {
    const { limits, now } = this.deps;
    const ask = await this.preflight(input);
    const { endpoint, defaults, registry } = ask;
    // The input is read once, validated as it streams in. It is kept in scratch space only when the batch may
    // need splitting into shards, which takes a second pass to find the boundaries.
    const blob = await this.deps.blobs.open(input.inputKey);
    if (!blob) throw new NotFoundError("file", input.inputFileId, "input_file_id");
    // Defaults (the batch's, its model's) are written into the batch's own copy of its input, which is made here.
    // (Not over a plan: its shards are byte ranges of the file as it is.)
    const modelDefaults = !input.plan && registry.models.some((m) => m.defaults);
    let local =
      defaults || modelDefaults || (limits.shardSize < limits.maxRequestsPerBatch && !input.plan) ? this.scratchFile() : undefined;
    let readError: unknown;
    blob.content.once("error", (err) => (readError ??= err));
    try {
      if (local) await this.download(blob.content, local, defaults);
      const v = await validateBatchFile(local ?? blob.content, endpoint, {
        maxRequests: limits.maxRequestsPerBatch,
        maxLineBytes: limits.maxLineBytes,
        oneModel: !input.mixedModels,
        countTokens: this.deps.countTokens,
      });
      // The storage failing to deliver the input is the storage's fault, not a fault of the file.
      if (readError) throw readError;
      const id = input.id ?? newBatchId();
      const batch = newBatchObject({ id, ...input, created: now(), windowSeconds: ask.windowSeconds, validation: v, registry });
      // The model's defaults go under the lines' and the batch's, for the parameters this endpoint takes.
      const fromModel = modelDefaults ? defaultsFor(endpoint, batch.model ? registry.get(batch.model)?.defaults : undefined) : {};
      const applied = { ...fromModel, ...defaults };
      if (local && Object.keys(fromModel).length > 0 && batch.status === "validating") local = await this.rewrite(local, fromModel);
      if (Object.keys(applied).length > 0) batch.default_params = applied;
      checkCostKnown(ask.rules, batch, v, registry);
      const shards = await this.shardsOf(batch, input, v.total, local, blob.size);
      await this.record({ input, batch, shards, local, validation: v, registry });
      await this.announce(batch, v, shards.length);
      return batch;
    } finally {
      blob.content.destroy();
      if (local) await rm(local, { force: true });
    }
  }

  /** What is checked before the input is read: the create's fields, that this process takes batches, the queue's room. */
  private async preflight(input: AdmitInput) {
    const windowSeconds = parseCompletionWindow(input.completion_window);
    const rules = stopRulesOf(input.metadata);
    checkCacheMetadata(input.metadata);
    const defaults = input.default_params && Object.keys(input.default_params).length > 0 ? input.default_params : undefined;
    const endpoint = servedEndpoint(input.endpoint);
    if (defaults) checkDefaultParams(endpoint, defaults);
    this.checkOpen();
    const full = await this.queueRefusal(input.owner);
    if (full) throw full;
    const registry = (await this.deps.served?.forBatch()) ?? this.deps.registry;
    return { windowSeconds, rules, defaults, endpoint, registry };
  }

  /** The local copy again with the model's defaults under each line's body; the first copy goes, whatever happens. */
  private async rewrite(local: string, defaults: Record<string, unknown>): Promise<string> {
    const again = this.scratchFile();
    try {
      await this.download(createReadStream(local), again, defaults);
    } catch (err) {
      await rm(again, { force: true });
      throw err;
    } finally {
      await rm(local, { force: true });
    }
    return again;
  }

  /** Its shards: none for a batch that failed validation, the plan given, else cut from the local copy by SHARD_SIZE. */
  private async shardsOf(
    batch: Batch,
    input: AdmitInput,
    total: number,
    local: string | undefined,
    blobSize: number,
  ): Promise<ShardPlan[]> {
    // Without a local copy every request fits one shard (a batch holds at most MAX_REQUESTS_PER_BATCH).
    const shardSize = this.deps.limits.shardSize;
    if (batch.status !== "validating") return [];
    if (input.plan) return input.plan;
    if (local && total > shardSize) return await planShards(local, shardSize);
    return [oneShard({ total, bytes: batch.default_params && local ? (await stat(local)).size : blobSize })];
  }

  /**
   * Stores the batch's own input where it keeps one, and records the batch with its shards against the queue's depth
   * and the key's limits (over them: the batch ends failed, its shards emptied). A refusal removes what was stored.
   */
  private async record(a: {
    input: AdmitInput;
    batch: Batch;
    shards: ShardPlan[];
    local: string | undefined;
    validation: Validation;
    registry: ModelRegistry;
  }): Promise<void> {
    const { input, batch, shards, local } = a;
    const { blobs, now } = this.deps;
    const own = this.deps.ownInput || batch.default_params !== undefined;
    const inputKey = own ? batchKeys(batch.id).input : input.inputKey;
    // A batch refused from here on (a full queue, a full or failing disk) leaves none of its parts behind.
    const refuse = async (err: unknown) => {
      if (own) await blobs.deletePrefix(`${batch.id}/`).catch(() => undefined);
      return err;
    };
    let admitted: boolean;
    try {
      if (batch.default_params && local) await blobs.putFile(inputKey, local);
      else if (this.deps.ownInput && (await blobs.copy(input.inputKey, inputKey)) === undefined)
        throw new NotFoundError("file", input.inputFileId, "input_file_id");
      const insert = (shards: ShardPlan[], limited: boolean) =>
        this.deps.batches.insert({
          batch,
          owner: input.owner,
          inputKey,
          outputExpiresAfter: input.output_expires_after,
          shards,
          maxQueued: this.deps.limits.maxQueueDepth,
          webhook: webhookEvent(batch, input.owner, this.deps.webhooks, now()) ?? null,
          ...(limited ? this.keyLimits(a.validation, input.owner, a.registry) : {}),
        });
      try {
        admitted = await insert(shards, batch.status === "validating");
      } catch (err) {
        if (!(err instanceof TokenLimitReached)) throw err;
        // As OpenAI ends a batch over its organization's limit: failed, with nothing run.
        failOverLimit(batch, err, this.deps.keys?.idOf(input.owner) ?? null, now());
        shards.length = 0;
        admitted = await insert([], false);
      }
    } catch (err) {
      throw await refuse(err);
    }
    // Checked before the work above (a cheap early answer) and again here, atomically across API servers.
    if (!admitted) throw await refuse((await this.queueRefusal(input.owner)) ?? queueFull(QUEUE_FULL_RETRY_AFTER_SECONDS));
  }

  /** The key's enqueued-token limits the batch is recorded against. */
  private keyLimits(v: Validation, owner: Owner, registry: ModelRegistry) {
    return batchLimits(v.enqueuedTokens ?? {}, v.model, owner, registry, this.deps.keys?.limitOf.bind(this.deps.keys));
  }

  /** A recorded batch: the workers are told there is work (a failed one is counted as ended), and the log says which. */
  private async announce(batch: Batch, v: Validation, shards: number): Promise<void> {
    if (batch.status === "failed") this.deps.metrics?.batchEnded(batch);
    else await this.deps.events.publish({ type: "work" }).catch(() => undefined);
    this.deps.logger.info(
      { batch_id: batch.id, status: batch.status, total: v.total, shards, errors: v.errorCount, deadline_at: batch.deadline_at },
      batch.status === "validating" ? "batch accepted and queued" : "batch failed validation",
    );
  }

  /** The refusal (429 queue_full) of a batch the queue has no room for: full, or its key holding its share. */
  private async queueRefusal(owner: Owner): Promise<Error | undefined> {
    const room = queueRoom(await this.deps.batches.queuedByOwner(), owner, this.deps.limits.maxQueueDepth);
    return room.admit ? undefined : queueFull(QUEUE_FULL_RETRY_AFTER_SECONDS, room.share, room.full);
  }

  /** A fresh path for one temporary file in the scratch space. */
  scratchFile(): string {
    return path.join(this.deps.scratchDir, `api-${randomUUID()}.jsonl`);
  }

  /** The input into the scratch space; with defaults, each line's body under them (domain/default-params.ts). */
  private async download(content: Readable, local: string, defaults?: Record<string, unknown>): Promise<void> {
    const out = await inDir(this.deps.scratchDir, () => open(local, "w"));
    if (!defaults) return void (await pipeline(content, createWriteStream(local, { fd: out })));
    await pipeline(
      async function* () {
        for await (const line of createInterface({ input: content, crlfDelay: Number.POSITIVE_INFINITY }))
          yield `${withDefaults(line, defaults)}\n`;
      },
      createWriteStream(local, { fd: out }),
    );
  }
}
