// The Batch API on the cluster ports (what an API server runs, or the one process): creates go to the admission
// (admission.ts; inline-batches.ts for lines in the body, retry-batches.ts for a batch's failed lines); reads, lists,
// cancels, pauses and deletes go to the batch records (PostgreSQL's, so any API server answers for any batch, or
// one process's).

import { checkInputFile } from "../domain/batch-object.js";
import type { BatchPlan } from "../domain/batch-plan.js";
import type { OutputLines } from "../domain/batch-reads.js";
import { isEnding, isFinal, transition } from "../domain/batch-state.js";
import { GoneError, InvalidRequestError, NotFoundError } from "../domain/errors.js";
import type { Batch } from "../domain/objects.js";
import type { BatchService, CreateBatchInput, CreateInlineBatchInput, Owner, Page } from "../domain/ports.js";
import type { RetryFilter } from "../domain/retry.js";
import type { BatchRow } from "../state/ports.js";
import { admitFile } from "./adapter-batches.js";
import { Admission, type ClusterBatchServiceDeps } from "./admission.js";
import { clientView } from "./client-view.js";
import { createInlineBatch, inlineInputName } from "./inline-batches.js";
import { readOutput } from "./output-reads.js";
import { planBatch } from "./plan.js";
import { removeBatch } from "./remove-batch.js";
import { retryFailedLines } from "./retry-batches.js";

export type { ClusterBatchServiceDeps };

/** What a batch that has ended, or is ending, is: its status, or the end decided for it while its last lines stop. */
function endingStatus(row: BatchRow): string {
  if (isEnding(row.batch.status)) return row.batch.status;
  return row.stopReason === "cancelled" ? "cancelling" : `ending (${row.stopReason})`;
}

/** How long a cancel waits for a batch whose end was decided otherwise to show it (a maintenance tick and more). */
const DECIDED_END_WAIT_MS = 5_000;

export class ClusterBatchService implements BatchService {
  private readonly admission: Admission;

  constructor(private readonly deps: ClusterBatchServiceDeps) {
    this.admission = new Admission(deps);
  }

  /** From now on new batches are refused (503 with a retry delay): this process is stopping. */
  close(): void {
    this.admission.close();
  }

  async create(input: CreateBatchInput): Promise<Batch> {
    const file = checkInputFile(await this.deps.files.keyOf(input.input_file_id, input.owner), input.input_file_id);
    // A base model and its adapters in one file: grouped by model (adapter-batches.ts).
    return this.view(await admitFile(this.deps, this.admission, { ...input, inputFileId: input.input_file_id, inputKey: file.key }));
  }

  plan(input: CreateBatchInput): Promise<BatchPlan> {
    this.admission.checkOpen();
    const { planning, ...deps } = this.deps;
    return planBatch({ ...deps, ...planning, cacheOn: planning?.cacheOn ?? false }, input);
  }

  /** A batch as clients read it (batches/client-view.ts). */
  private view(batch: Batch): Batch {
    return clientView(batch, this.deps.registry, this.deps.now());
  }

  async createInline(input: CreateInlineBatchInput): Promise<Batch> {
    return this.view(await createInlineBatch(this.deps, this.admission, input));
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
        `Batch '${id}' is ${endingStatus(row)}: only a batch that has not ended can be ${verb}.`,
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
    return this.view(await retryFailedLines(this.deps, this.admission, id, owner, filter));
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

  /** The output lines committed so far, in the output file's order (batches/output-reads.ts). */
  async results(id: string, owner: Owner): Promise<AsyncIterable<string> | undefined> {
    const read = await this.output(id, owner, { after: 0 });
    return read && read.committed > 0 ? read.lines : undefined;
  }

  async output(id: string, owner: Owner | undefined, q: { after: number; limit?: number }): Promise<OutputLines | undefined> {
    const row = await this.deps.batches.get(id, owner);
    if (!row) return undefined;
    const { batch } = row;
    // An ended batch's lines are its output file's. Deleting (or expiring) that file unnames it from the batch:
    // completed lines and no output file means they were there and are gone, not that none ran yet.
    if (isFinal(batch.status) && !batch.output_file_id && batch.request_counts.completed > 0)
      throw new GoneError(
        `Batch '${id}' has no results any more: its output file has been deleted or has expired (its ${batch.request_counts.completed} completed lines went with it).`,
        "output_gone",
        null,
      );
    return readOutput(this.deps, batch, q);
  }
}
