// The Batch API on the cluster ports (what an API server runs, or the one process): a batch is validated here,
// split into shards recorded with it in one step, and announced to the workers; reads, lists and cancels go to
// the batch records (PostgreSQL's, so any API server answers for any batch, or one process's).

import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, open, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type pino from "pino";
import type { ModelRegistry } from "../backends/registry.js";
import type { KeyRing } from "../config/keys.js";
import { checkInputFile, newBatchObject, servedEndpoint } from "../domain/batch-object.js";
import type { OutputLines } from "../domain/batch-reads.js";
import { isEnding, isFinal, transition } from "../domain/batch-state.js";
import { parseCompletionWindow } from "../domain/completion-window.js";
import { checkDefaultParams, defaultsFor, withDefaults } from "../domain/default-params.js";
import { InvalidRequestError, NotFoundError, queueFull, shuttingDown } from "../domain/errors.js";
import { newBatchId } from "../domain/ids.js";
import type { Batch, BatchEndpoint } from "../domain/objects.js";
import type { BatchService, CreateBatchInput, CreateInlineBatchInput, ExpiresAfter, Owner, Page } from "../domain/ports.js";
import { errorCodeOf, type RetryFilter, retryMetadata, wantsRetry } from "../domain/retry.js";
import { stopRulesOf } from "../domain/stop-rules.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import { readCompleteJsonLines } from "../pipeline/jsonl.js";
import { oneShard, planModelShards, planShards, type ShardPlan } from "../pipeline/shards.js";
import type { TokenCounter } from "../pipeline/token-estimate.js";
import type { ValidationResult } from "../pipeline/types.js";
import { validateBatchFile } from "../pipeline/validate.js";
import type { BlobStore } from "../stores/blob-store.js";
import { inDir } from "../stores/in-dir.js";
import { batchKeys } from "./blob-layout.js";
import { blobLines } from "./blob-lines.js";
import { clientView } from "./client-view.js";
import { readOutput } from "./output-reads.js";
import { removeBatch } from "./remove-batch.js";
import { type BatchRecords, type EventBus, type FileRecords, TokenLimitReached, type WorkQueue } from "./state-ports.js";
import { type WebhookTargets, webhookEvent } from "./webhooks.js";

export const QUEUE_FULL_RETRY_AFTER_SECONDS = 30;
/** How long a cancel waits for a batch whose end was decided otherwise to show it (a maintenance tick and more). */
const DECIDED_END_WAIT_MS = 5_000;

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
  /**
   * Each batch keeps its own copy of its requests, <batch_id>/input.jsonl (one machine's layout): deleting the
   * upload can never touch a batch. Otherwise batches read their input file's content where it is.
   */
  ownInput?: boolean;
}

/** Sent as Retry-After with a 503 while the process drains: a restart (or another API server) takes seconds. */
const SHUTDOWN_RETRY_AFTER_SECONDS = 5;

export class ClusterBatchService implements BatchService {
  private closing = false;

  constructor(private readonly deps: ClusterBatchServiceDeps) {}

  /** From now on new batches are refused (503 with a retry delay): this process is stopping. */
  close(): void {
    this.closing = true;
  }

  async create(input: CreateBatchInput): Promise<Batch> {
    const file = checkInputFile(await this.deps.files.keyOf(input.input_file_id, input.owner), input.input_file_id);
    return this.view(await this.createBatch({ ...input, inputFileId: input.input_file_id, inputKey: file.key }));
  }

  /** A batch as clients read it (cluster/client-view.ts). */
  private view(batch: Batch): Batch {
    return clientView(batch, this.deps.registry, this.deps.now());
  }

  async createInline(input: CreateInlineBatchInput): Promise<Batch> {
    if (this.closing) throw shuttingDown(SHUTDOWN_RETRY_AFTER_SECONDS);
    servedEndpoint(input.endpoint);
    parseCompletionWindow(input.completion_window);
    const local = this.scratchFile();
    try {
      const groups = input.mixedModels
        ? byModel(input.lines, (m) => this.deps.registry.resolve(m)?.name ?? m)
        : [{ model: "", lines: input.lines.map((l) => `${JSON.stringify(l)}\n`) }];
      const content = groups.flatMap((g) => g.lines).join("");
      // Lines of several models: grouped in the file, and a shard never spans two, so each runs on its own model.
      const plan = groups.length > 1 ? planModelShards(groups, this.deps.limits.shardSize) : undefined;
      await inDir(this.deps.scratchDir, () => writeFile(local, content));
      const batchId = newBatchId();
      const obj = await this.deps.files.adopt({ tmpPath: local, filename: inlineInputName(batchId), purpose: "batch", owner: input.owner });
      try {
        const file = await this.deps.files.keyOf(obj.id, input.owner);
        return this.view(await this.createBatch({ ...input, id: batchId, inputFileId: obj.id, inputKey: file!.key, plan }));
      } catch (err) {
        // The client sent lines, not a file: a batch refused (429, 503, a full disk) leaves no file behind.
        await this.deps.files.delete(obj.id, input.owner).catch(() => undefined);
        throw err;
      }
    } finally {
      await rm(local, { force: true });
    }
  }

  async get(id: string, owner: Owner | undefined): Promise<Batch | undefined> {
    const row = await this.deps.batches.get(id, owner);
    return row && this.view(row.batch);
  }

  async list(q: { after?: string; limit: number; owner: Owner | undefined }): Promise<Page<Batch>> {
    const page = await this.deps.batches.list(q);
    return { ...page, data: page.data.map((b) => this.view(b)) };
  }

  /**
   * The cancel is decided here (cancelling, from the status read) and announced: the workers running its shards
   * stop them, maintenance writes the waiting shards' error lines, and the batch ends cancelled once all are done.
   * A batch that an expiry or a failure stopped first is not cancelled: the answer is how it stands.
   */
  async cancel(id: string, owner: Owner): Promise<Batch> {
    const { batches, now, events, logger } = this.deps;
    const row = await batches.get(id, owner);
    if (!row) throw new NotFoundError("batch", id);
    if (isEnding(row.batch.status)) return this.view(row.batch);
    if (row.stopReason) return this.decidedEnd(id, owner);
    const updated = await batches.update(id, ["validating", "in_progress"], (r) => {
      if (r.stopReason) return false;
      transition(r.batch, "cancelling", now());
      r.stopReason = "cancelled";
    });
    if (!updated) return this.decidedEnd(id, owner);
    logger.info({ batch_id: id }, "cancelling batch");
    await events.publish({ type: "stop", batch_id: id, reason: "cancelled" });
    return this.view(updated.batch);
  }

  /**
   * Pauses a batch that has not ended: nothing more of it is claimed, and its running shards checkpoint and go back
   * to the queue once their requests in flight finish (the workers hear the event, or their next heartbeat says
   * so). Its status stays; its deadline does not move. Pausing a paused batch changes nothing. `owner` undefined:
   * an admin, any key's batch.
   */
  async pause(id: string, owner: Owner | undefined): Promise<Batch> {
    const { batches, now, events, logger } = this.deps;
    const row = await this.openBatch(id, owner, "paused");
    if (row.batch.paused_at) return this.view(row.batch);
    const updated = await batches.update(id, ["validating", "in_progress"], (r) => {
      if (r.stopReason || r.batch.paused_at) return false;
      r.batch.paused_at = now();
    });
    if (!updated) return this.view((await batches.get(id, owner))!.batch);
    logger.info({ batch_id: id }, "batch paused");
    await events.publish({ type: "pause", batch_id: id }).catch(() => undefined);
    return this.view(updated.batch);
  }

  /** Resumes a paused batch where it stopped: its shards are claimable again. Resuming a running batch changes nothing. */
  async resume(id: string, owner: Owner | undefined): Promise<Batch> {
    const { batches, events, logger } = this.deps;
    const row = await this.openBatch(id, owner, "resumed");
    if (!row.batch.paused_at) return this.view(row.batch);
    const updated = await batches.update(id, ["validating", "in_progress"], (r) => {
      if (!r.batch.paused_at) return false;
      r.batch.paused_at = null;
    });
    if (!updated) return this.view((await batches.get(id, owner))!.batch);
    logger.info({ batch_id: id }, "batch resumed");
    await events.publish({ type: "work" }).catch(() => undefined);
    return this.view(updated.batch);
  }

  /**
   * Pauses (or resumes) every batch that has not ended, of `owner` (undefined: every key's) and of `model` if
   * given: to free the engine for a deadline, say. Returns the batches it changed.
   */
  async pauseMany(action: "pause" | "resume", q: { owner: Owner | undefined; model?: string }): Promise<Batch[]> {
    const changed: Batch[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await this.deps.batches.list({ after, limit: 100, owner: q.owner });
      for (const b of page.data) {
        if (isEnding(b.status) || (q.model !== undefined && b.model !== q.model)) continue;
        if (Boolean(b.paused_at) === (action === "pause")) continue;
        const done = await this[action](b.id, q.owner).catch((err) => {
          if (err instanceof InvalidRequestError) return undefined; // it ended meanwhile
          throw err;
        });
        if (done) changed.push(done);
      }
      if (!page.has_more || page.data.length === 0) return changed;
      after = page.data.at(-1)!.id;
    }
  }

  /** The batch, if it may still be paused or resumed: not ended, and not ending. */
  private async openBatch(id: string, owner: Owner | undefined, verb: string) {
    const row = await this.deps.batches.get(id, owner);
    if (!row) throw new NotFoundError("batch", id);
    if (row.stopReason || isEnding(row.batch.status))
      throw new InvalidRequestError(
        `Batch '${id}' is ${row.stopReason === "cancelled" ? "cancelling" : row.batch.status}: only a batch that has not ended can be ${verb}.`,
        "batch_not_running",
        null,
      );
    return row;
  }

  /**
   * A cancel that lost to another end (the deadline, a failure) answers with that end, not with the `in_progress`
   * the batch shows while its last lines are written: it waits (boundedly) for the final status.
   */
  private async decidedEnd(id: string, owner: Owner): Promise<Batch> {
    const until = Date.now() + DECIDED_END_WAIT_MS;
    for (;;) {
      const row = (await this.deps.batches.get(id, owner))!;
      if (isEnding(row.batch.status) || !row.stopReason || Date.now() >= until) return this.view(row.batch);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async retry(id: string, owner: Owner, filter: RetryFilter): Promise<Batch> {
    const { batches, files, blobs } = this.deps;
    const row = await batches.get(id, owner);
    if (!row) throw new NotFoundError("batch", id);
    const { batch } = row;
    if (!isFinal(batch.status)) {
      throw new InvalidRequestError(
        `Batch '${id}' is ${batch.status}; only a finished batch's failed lines can be retried.`,
        "batch_not_finished",
        "batch_id",
      );
    }
    const errorFile = batch.error_file_id ? await files.keyOf(batch.error_file_id, owner) : undefined;
    const wanted = new Set<string>();
    for await (const text of this.linesOf(errorFile ? [errorFile.key] : [])) {
      const line = JSON.parse(text) as Parameters<typeof errorCodeOf>[0] & { custom_id?: unknown };
      if (typeof line.custom_id === "string" && wantsRetry(errorCodeOf(line), filter)) wanted.add(line.custom_id);
    }
    if (wanted.size === 0) {
      const why = batch.errors?.data.length
        ? "its input file failed validation (see errors); upload a corrected file"
        : filter.codes || filter.include_cancelled === false || filter.include_expired === false
          ? "none of its failed lines matches the filter"
          : "none of its lines failed";
      throw new InvalidRequestError(`Batch '${id}' has nothing to retry: ${why}.`, "nothing_to_retry", null);
    }
    const input = row.inputKey ? await blobs.open(row.inputKey) : undefined;
    if (!input) throw new InvalidRequestError(`Batch '${id}' no longer has its input to retry from.`, "input_gone", "batch_id");
    const local = this.scratchFile();
    try {
      await mkdir(this.deps.scratchDir, { recursive: true });
      await pipeline(retriedLines(readCompleteJsonLines(input.content), wanted), createWriteStream(local));
      const obj = await files.adopt({ tmpPath: local, filename: `${id}_retry.jsonl`, purpose: "batch", owner });
      try {
        const created = await this.createBatch({
          owner,
          endpoint: servedEndpoint(batch.endpoint),
          completion_window: batch.completion_window,
          metadata: retryMetadata(batch.metadata, id),
          output_expires_after: row.outputExpiresAfter,
          inputFileId: obj.id,
          inputKey: (await files.keyOf(obj.id, owner))!.key,
        });
        return this.view(created);
      } catch (err) {
        await files.delete(obj.id, owner).catch(() => undefined);
        throw err;
      }
    } finally {
      await rm(local, { force: true });
    }
  }

  async delete(id: string, owner: Owner): Promise<void> {
    const row = await this.deps.batches.get(id, owner);
    if (!row) throw new NotFoundError("batch", id);
    if (!isFinal(row.batch.status))
      throw new InvalidRequestError(
        `Batch '${id}' is ${row.batch.status}; only a finished batch can be deleted (cancel it first).`,
        "batch_not_finished",
        "batch_id",
      );
    // The requests of an inline batch (Anthropic's create) are in a file the client never made: it goes too.
    const input = await this.deps.files.get(row.batch.input_file_id, owner);
    await removeBatch(this.deps, id, { withResults: true });
    if (input?.object.filename === inlineInputName(id)) await this.deps.files.delete(input.object.id, owner);
    this.deps.logger.info({ batch_id: id }, "batch deleted");
  }

  /** The output lines committed so far, in the output file's order (cluster/output-reads.ts). */
  async results(id: string, owner: Owner): Promise<AsyncIterable<string> | undefined> {
    const read = await this.output(id, owner, { after: 0 });
    return read && read.committed > 0 ? read.lines : undefined;
  }

  async output(id: string, owner: Owner | undefined, q: { after: number; limit?: number }): Promise<OutputLines | undefined> {
    const row = await this.deps.batches.get(id, owner);
    return row ? readOutput(this.deps, row.batch, q) : undefined;
  }

  private linesOf(keys: string[]): AsyncGenerator<string> {
    return blobLines(this.deps.blobs, keys);
  }

  private async createBatch(input: {
    id?: string;
    owner: Owner;
    endpoint: BatchEndpoint;
    completion_window: string;
    metadata?: Record<string, string> | null;
    output_expires_after?: ExpiresAfter;
    default_params?: Record<string, unknown>;
    inputFileId: string;
    inputKey: string;
    /** Lines may name several models (then `plan` holds the shards, one model each). */
    mixedModels?: boolean;
    plan?: ShardPlan[];
  }): Promise<Batch> {
    const { limits, batches, logger, now } = this.deps;
    const windowSeconds = parseCompletionWindow(input.completion_window);
    const rules = stopRulesOf(input.metadata);
    const defaults = input.default_params && Object.keys(input.default_params).length > 0 ? input.default_params : undefined;
    const endpoint = servedEndpoint(input.endpoint);
    if (defaults) checkDefaultParams(endpoint, defaults);
    if (this.closing) throw shuttingDown(SHUTDOWN_RETRY_AFTER_SECONDS);
    if ((await batches.queuedCount()) >= limits.maxQueueDepth) throw queueFull(QUEUE_FULL_RETRY_AFTER_SECONDS);
    // The input is read once, validated as it streams in. It is kept in scratch space only when the batch may
    // need splitting into shards, which takes a second pass to find the boundaries.
    const blob = await this.deps.blobs.open(input.inputKey);
    if (!blob) throw new NotFoundError("file", input.inputFileId, "input_file_id");
    // Defaults (the batch's, its model's) are written into the batch's own copy of its input, which is made here.
    // (Not over a plan: its shards are byte ranges of the file as it is.)
    const modelDefaults = !input.plan && this.deps.registry.models.some((m) => m.defaults);
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
      const batch = newBatchObject({ id, ...input, created: now(), windowSeconds, validation: v, registry: this.deps.registry });
      // The model's defaults go under the lines' and the batch's, for the parameters this endpoint takes.
      const fromModel = modelDefaults ? defaultsFor(endpoint, batch.model ? this.deps.registry.get(batch.model)?.defaults : undefined) : {};
      const applied = { ...fromModel, ...defaults };
      if (local && Object.keys(fromModel).length > 0 && batch.status === "validating") {
        const again = this.scratchFile();
        try {
          await this.download(createReadStream(local), again, fromModel);
        } finally {
          await rm(local, { force: true });
          local = again;
        }
      }
      if (Object.keys(applied).length > 0) batch.default_params = applied;
      if (rules.maxCost !== undefined && batch.model && !this.deps.registry.get(batch.model)?.price)
        throw new InvalidRequestError(
          `Invalid 'metadata.max_cost': the model '${batch.model}' has no price in the models file, so the batch's cost is unknown.`,
          "invalid_metadata",
          "metadata.max_cost",
        );
      // Without a local copy every request fits one shard (a batch holds at most MAX_REQUESTS_PER_BATCH).
      const shardSize = limits.shardSize;
      const shards =
        batch.status !== "validating"
          ? []
          : input.plan
            ? input.plan
            : local && v.total > shardSize
              ? await planShards(local, shardSize)
              : [oneShard({ total: v.total, bytes: batch.default_params && local ? (await stat(local)).size : blob.size })];
      const own = this.deps.ownInput || batch.default_params !== undefined;
      const inputKey = own ? batchKeys(id).input : input.inputKey;
      // A batch refused from here on (a full queue, a full or failing disk) leaves none of its parts behind.
      const refuse = async (err: unknown) => {
        if (own) await this.deps.blobs.deletePrefix(`${id}/`).catch(() => undefined);
        return err;
      };
      let admitted: boolean;
      try {
        if (batch.default_params && local) await this.deps.blobs.putFile(inputKey, local);
        else if (this.deps.ownInput && (await this.deps.blobs.copy(input.inputKey, inputKey)) === undefined)
          throw new NotFoundError("file", input.inputFileId, "input_file_id");
        const record = (shards: ShardPlan[], limited: boolean) =>
          batches.insert({
            batch,
            owner: input.owner,
            inputKey,
            outputExpiresAfter: input.output_expires_after,
            shards,
            maxQueued: limits.maxQueueDepth,
            webhook: webhookEvent(batch, input.owner, this.deps.webhooks, now()) ?? null,
            ...(limited ? this.enqueuedOf(v, input.owner) : {}),
          });
        try {
          admitted = await record(shards, batch.status === "validating");
        } catch (err) {
          if (!(err instanceof TokenLimitReached)) throw err;
          // As OpenAI ends a batch over its organization's limit: failed, with nothing run.
          failOverLimit(batch, err, this.deps.keys?.idOf(input.owner) ?? null, now());
          shards.length = 0;
          admitted = await record([], false);
        }
      } catch (err) {
        throw await refuse(err);
      }
      // Checked before the work above (a cheap early answer) and again here, atomically across API servers.
      if (!admitted) throw await refuse(queueFull(QUEUE_FULL_RETRY_AFTER_SECONDS));
      if (batch.status === "failed") this.deps.metrics?.batchEnded(batch);
      else await this.deps.events.publish({ type: "work" }).catch(() => undefined);
      logger.info(
        { batch_id: id, status: batch.status, total: v.total, shards: shards.length, errors: v.errorCount, deadline_at: batch.deadline_at },
        batch.status === "validating" ? "batch accepted and queued" : "batch failed validation",
      );
      return batch;
    } finally {
      blob.content.destroy();
      if (local) await rm(local, { force: true });
    }
  }

  /** The batch's estimated tokens by the model that serves each line, and its key's limits on those models. */
  private enqueuedOf(v: ValidationResult, owner: Owner): { enqueued: Record<string, number>; tokenLimits: Record<string, number> } {
    const enqueued: Record<string, number> = {};
    for (const [named, tokens] of Object.entries(v.enqueuedTokens ?? {})) {
      const model = this.deps.registry.resolve(named || undefined)?.name ?? (named || v.model || "");
      enqueued[model] = (enqueued[model] ?? 0) + tokens;
    }
    const tokenLimits: Record<string, number> = {};
    for (const model of Object.keys(enqueued)) {
      const limit = this.deps.keys?.limitOf(owner, model);
      if (limit !== undefined) tokenLimits[model] = limit;
    }
    return { enqueued, tokenLimits };
  }

  /** A fresh path for one temporary file in the scratch space. */
  private scratchFile(): string {
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

/** Ends `batch` failed at `now` with OpenAI's token_limit_exceeded error: no request runs, none is counted. */
function failOverLimit(batch: Batch, err: TokenLimitReached, keyId: string | null, now: number): void {
  const n = (x: number) => x.toLocaleString("en-US");
  const who = keyId ? ` for API key ${keyId}` : "";
  batch.errors = {
    object: "list",
    data: [
      {
        code: "token_limit_exceeded",
        message:
          `Enqueued token limit reached for ${err.model}${who}. Limit: ${n(err.limit)} enqueued tokens ` +
          `(already enqueued: ${n(err.enqueued)}; this batch: ${n(err.requested)}). ` +
          "Please try again once some in_progress batches have been completed.",
        line: null,
        param: null,
      },
    ],
  };
  batch.request_counts = { completed: 0, failed: 0, total: 0 };
  transition(batch, "failed", now);
}

/** The file an inline batch's requests are kept in. */
const inlineInputName = (batchId: string) => `${batchId}_input.jsonl`;

/** What a console search's text is looked for in: the id, the input file's name, the metadata's keys and values. */
/** The input's lines whose custom_id is wanted, each once (a batch's custom_ids are unique). */
async function* retriedLines(lines: AsyncIterable<string>, wanted: Set<string>): AsyncGenerator<string> {
  for await (const text of lines) {
    const id = (JSON.parse(text) as { custom_id?: unknown }).custom_id;
    if (typeof id === "string" && wanted.has(id)) yield `${text}\n`;
  }
}

/**
 * The lines as written to the batch's file, grouped by `modelOf` their body's model in order of first appearance;
 * a line naming no model stays in the first group (it fails on its own when it runs).
 */
function byModel(lines: CreateInlineBatchInput["lines"], modelOf: (model: string) => string): Array<{ model: string; lines: string[] }> {
  const groups = new Map<string, string[]>();
  const loose: string[] = [];
  for (const l of lines) {
    const text = `${JSON.stringify(l)}\n`;
    const named = typeof l.body.model === "string" ? modelOf(l.body.model) : undefined;
    const group = named === undefined ? loose : (groups.get(named) ?? groups.set(named, []).get(named)!);
    group.push(text);
  }
  const out = [...groups].map(([model, texts]) => ({ model, lines: texts }));
  if (out.length === 0) return [{ model: "", lines: loose }];
  out[0].lines.unshift(...loose);
  return out;
}
