// Dataset jobs on the service: a dataset file becomes request lines (stored as the batch's input file, so the
// batch is OpenAI's to the letter) and an ordinary batch; once it ends, its answers are joined back into the
// dataset on demand. Only the Files and Batches ports are used, so both modes serve it alike. A client's `where` is
// SQL: each read runs in a process of its own (dataset-read-processes.ts), its DuckDB confined to the read's scratch
// folder.
import { createWriteStream } from "node:fs";
import { mkdtemp, rm, statfs, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type pino from "pino";
import { outOfMemory, pastStepLimit } from "../datasets/duckdb-errors.js";
import { checkFields, type Job, JobError, planStages } from "../datasets/job.js";
import type { RequestSizes } from "../datasets/requests.js";
import { DatasetError, INPUT_FORMATS } from "../datasets/tables.js";
import { isFinal } from "../domain/batch-state.js";
import {
  type CreateDatasetBatchInput,
  DATASET_METADATA,
  type DatasetBatches,
  type DatasetTable,
  type TableFormat,
} from "../domain/dataset-batches.js";
import { InvalidRequestError, NotFoundError } from "../domain/errors.js";
import type { Batch } from "../domain/objects.js";
import type { BatchService, FileStore, Owner } from "../domain/ports.js";
import { inDir } from "../stores/in-dir.js";
import { DatasetReadProcesses, ReadStopped, readMemoryMb } from "./read-processes.js";
import { asField, type ReadLimits, type ReadTask } from "./read-tasks.js";
import { DatasetReads } from "./reads.js";

/** Without DATASET_SCRATCH_MB, a read may spill this share of the free space on its disk as it starts. */
const SCRATCH_SHARE = 1 / 20;

const CONTENT_TYPES: Record<TableFormat, string> = {
  parquet: "application/vnd.apache.parquet",
  csv: "text/csv; charset=utf-8",
  tsv: "text/tab-separated-values; charset=utf-8",
  jsonl: "application/jsonl",
};
/** Job fields the service refuses: its files are the uploaded one and the table it serves, and it runs no one's code. */
const NOT_OVER_HTTP: Record<string, string> = {
  input: "the dataset is input_file_id",
  output: "the table's format is chosen when it is downloaded (?format=)",
  endpoint: "the endpoint is the request's own endpoint",
  preprocess: "the service runs no uploaded code: use a template, or the runner",
  postprocess: "the service runs no uploaded code: use the runner",
};

interface StoredJob {
  fields: Record<string, unknown>;
  hash: string;
  rows: number;
  filename: string;
}

export class DatasetBatchService implements DatasetBatches {
  private readonly reads: DatasetReads;
  private readonly processes: DatasetReadProcesses;
  /** DATASET_READ_MEMORY_MB, resolved. */
  private readonly memoryMb: number;

  constructor(
    private readonly deps: {
      files: FileStore;
      batches: BatchService;
      scratchDir: string;
      logger: pino.Logger;
      /** DATASET_READS, DATASET_SCRATCH_MB, DATASET_READ_MEMORY_MB and DATASET_STEP_SECONDS. */
      limits: { reads: number; scratchMb: number; readMemoryMb: number; stepSeconds: number };
      /** MAX_LINE_BYTES and MAX_FILE_BYTES: a dataset whose requests a batch would refuse is refused at its create. */
      sizes: RequestSizes;
    },
  ) {
    this.reads = new DatasetReads(deps.limits.reads);
    this.memoryMb = readMemoryMb(deps.limits.readMemoryMb, deps.limits.reads);
    this.processes = new DatasetReadProcesses({ memoryMb: this.memoryMb, stepMs: deps.limits.stepSeconds * 1000, logger: deps.logger });
  }

  /** Ends the reads' processes. */
  close(): void {
    this.processes.close();
  }

  async create(input: CreateDatasetBatchInput, gone?: AbortSignal): Promise<Batch> {
    for (const key of Object.values(DATASET_METADATA)) {
      if (input.metadata?.[key] !== undefined)
        throw new InvalidRequestError(`metadata.${key} is set by the service`, "invalid_request", `metadata.${key}`);
    }
    for (const [field, why] of Object.entries(NOT_OVER_HTTP)) {
      if (input.job[field] !== undefined)
        throw new InvalidRequestError(`job.${field} is not taken here: ${why}.`, "invalid_request", `job.${field}`);
    }
    return this.reads.run(() => this.inScratch((work) => this.render(input, work, gone)), { key: input.owner ?? "", signal: gone });
  }

  /**
   * The dataset rendered in `work` into request lines, stored with the job as two files, and made into a batch;
   * nothing is recorded once the client has gone (`gone`).
   */
  private async render(input: CreateDatasetBatchInput, work: string, gone?: AbortSignal): Promise<Batch> {
    const filename = await this.download(input.input_file_id, input.owner, work);
    const job = this.jobOf({ ...input.job, endpoint: input.endpoint }, work, filename, "table.jsonl");
    const rendered = await this.inProcess(
      { kind: "render", work, job, filename, limits: await this.readLimits(work), sizes: this.deps.sizes },
      gone,
    );
    gone?.throwIfAborted();
    const stored: StoredJob = { fields: input.job, hash: rendered!.hash, rows: rendered!.rows, filename };
    await writeFile(path.join(work, "job.json"), JSON.stringify(stored));
    const base = filename.replace(/\.[^.]+$/, "");
    const adopt = (name: string, suffix: string) =>
      this.deps.files.adopt({ tmpPath: path.join(work, name), filename: `${base}.${suffix}`, purpose: "batch", owner: input.owner });
    const jobFile = await adopt("job.json", "dataset-job.json");
    let linesFile: { id: string } | undefined;
    try {
      linesFile = await adopt("requests.jsonl", "requests.jsonl");
      // The last moment a create can still be called off whole: past it, the batch is recorded and answered.
      gone?.throwIfAborted();
      return await this.deps.batches.create({
        input_file_id: linesFile.id,
        endpoint: input.endpoint,
        completion_window: input.completion_window,
        metadata: { ...(input.metadata ?? {}), [DATASET_METADATA.input]: input.input_file_id, [DATASET_METADATA.job]: jobFile.id },
        owner: input.owner,
      });
    } catch (err) {
      // A batch refused (429, 503, a full disk) or a client gone leaves none of the files made for it behind.
      for (const id of [linesFile?.id, jobFile.id]) if (id) await this.deps.files.delete(id, input.owner).catch(() => undefined);
      throw err;
    }
  }

  async table(id: string, owner: Owner, format: TableFormat, gone?: AbortSignal): Promise<DatasetTable> {
    const batch = await this.deps.batches.get(id, owner);
    if (!batch) throw new NotFoundError("batch", id);
    const inputId = batch.metadata?.[DATASET_METADATA.input];
    const jobId = batch.metadata?.[DATASET_METADATA.job];
    if (!inputId || !jobId)
      throw new InvalidRequestError(`Batch '${id}' was not made from a dataset (POST /v1/dataset_batches).`, "not_a_dataset_batch");
    if (!isFinal(batch.status))
      throw new InvalidRequestError(`Batch '${id}' is ${batch.status}: its table exists once it ends.`, "batch_not_finished");
    return this.reads.run(
      async () => {
        const work = await this.scratch();
        try {
          const joined = await this.join(batch, { inputId, jobId, owner, format }, work, gone);
          return { ...joined, contentType: CONTENT_TYPES[format], remove: () => rm(work, { recursive: true, force: true }) };
        } catch (err) {
          await rm(work, { recursive: true, force: true });
          throw err;
        }
      },
      { key: owner ?? "", signal: gone },
    );
  }

  /** The ended batch's answers joined in `work` into its dataset, as `format`. */
  private async join(
    batch: Batch,
    o: { inputId: string; jobId: string; owner: Owner; format: TableFormat },
    work: string,
    gone?: AbortSignal,
  ): Promise<{ path: string; filename: string }> {
    // A file the table is made of that was deleted (or expired) is said as that, not as a parameter not found.
    const needed = <T>(what: string, read: Promise<T>) =>
      read.catch((err) => {
        if (err instanceof NotFoundError) throw tableGone(batch, what);
        throw err;
      });
    const stored = JSON.parse(await needed("job file", this.text(o.jobId, o.owner))) as StoredJob;
    const filename = await needed("dataset file", this.download(o.inputId, o.owner, work));
    const output = path.join(work, "output.jsonl");
    const errors = path.join(work, "errors.jsonl");
    await needed("output file", this.save(batch.output_file_id, o.owner, output, true));
    await this.save(batch.error_file_id, o.owner, errors);
    const earlier = await this.retried(batch, o.owner, work);
    const table = `${stored.filename.replace(/\.[^.]+$/, "")}.${o.format}`;
    const job = this.jobOf({ ...stored.fields, endpoint: batch.endpoint }, work, filename, table);
    const limits = await this.readLimits(work);
    await this.inProcess(
      {
        kind: "join",
        work,
        job,
        filename,
        limits,
        rows: stored.rows,
        hash: stored.hash,
        output,
        errors,
        earlier,
      },
      gone,
    ).catch((err) => {
      if (err instanceof InvalidRequestError && /has no result yet/.test(err.message))
        throw new InvalidRequestError(`Batch '${batch.id}' ended ${batch.status} before its lines ran: it has no table.`, "batch_not_run");
      throw err;
    });
    return { path: job.output, filename: table };
  }

  /** What bounds a read in `work`: its steps' time, its memory, its spill (a share of the free disk by default). */
  private async readLimits(work: string): Promise<ReadLimits> {
    const { scratchMb, stepSeconds } = this.deps.limits;
    const s = await statfs(work);
    const maxTempBytes = scratchMb > 0 ? scratchMb * 2 ** 20 : Math.floor(s.bavail * s.bsize * SCRATCH_SHARE);
    return {
      stepMs: stepSeconds * 1000,
      // DuckDB spills past its own buffer limit, well within the process's.
      duckMemoryMb: Math.min(256, Math.floor(this.memoryMb / 2)),
      maxTempBytes,
      names: {
        memory: `DATASET_READ_MEMORY_MB=${this.memoryMb}, DATASET_SCRATCH_MB=${Math.ceil(maxTempBytes / 2 ** 20)}`,
        time: "DATASET_STEP_SECONDS",
      },
    };
  }

  /**
   * `task` in a read's own process; a fault of the dataset or the job is the client's request's (a 400 naming the
   * file by its uploaded name), what it leaves out of a client's SQL error goes to the log, and a read stopped at its
   * memory or its time is a 400 naming the where (or the file) and the setting that bounds it.
   */
  private async inProcess(task: ReadTask, gone?: AbortSignal) {
    const { job, filename } = task;
    try {
      return await this.processes.run(task, gone);
    } catch (err) {
      const said = err instanceof ReadStopped ? this.stopped(err, task) : err;
      if (!(said instanceof DatasetError || said instanceof JobError)) throw said;
      if (said instanceof DatasetError && said.detail !== undefined)
        this.deps.logger.info(
          { where: job.where, duckdb: said.detail },
          "a dataset's where was refused; the client was told its clause and kind",
        );
      // A job's own value at fault (not a row's) names the field as a bad job field does, whatever the rows hold.
      if (said instanceof JobError && said.field)
        throw new InvalidRequestError(asField(said.message), "invalid_dataset_job", asField(said.field));
      const param = said instanceof DatasetError && said.field ? asField(said.field) : undefined;
      throw new InvalidRequestError(said.message.replaceAll(job.input, filename), "invalid_dataset", param);
    }
  }

  /** A read killed from outside, said as DuckDB's own stop at a limit is. */
  private stopped(err: ReadStopped, task: ReadTask): DatasetError {
    const { memory, time } = task.limits.names;
    const why = err.bound === "memory" ? outOfMemory(memory) : pastStepLimit(task.limits.stepMs, time);
    return task.job.where === undefined
      ? new DatasetError(`${task.filename}: ${why}`, undefined, undefined, err.bound)
      : new DatasetError(`where: ${why}`, undefined, "where", err.bound);
  }

  /**
   * The result files of the batches a retry batch ran the failed lines of (`metadata.retry_of`, followed back),
   * oldest first: its table is the whole dataset, each row's latest answer.
   */
  private async retried(batch: Batch, owner: Owner, work: string): Promise<Array<{ output: string; errors: string }>> {
    const chain: Batch[] = [];
    const seen = new Set([batch.id]);
    for (let id = batch.metadata?.retry_of; id && !seen.has(id) && chain.length < 50; id = chain[0].metadata?.retry_of) {
      seen.add(id);
      const earlier = await this.deps.batches.get(id, owner);
      if (!earlier) break;
      chain.unshift(earlier);
    }
    const files: Array<{ output: string; errors: string }> = [];
    for (const [i, b] of chain.entries()) {
      const f = { output: path.join(work, `earlier-${i}-output.jsonl`), errors: path.join(work, `earlier-${i}-errors.jsonl`) };
      await this.save(b.output_file_id, owner, f.output);
      await this.save(b.error_file_id, owner, f.errors);
      files.push(f);
    }
    return files;
  }

  /** The job's fields checked as the runner checks a job file's, over the dataset in `work`. */
  private jobOf(fields: Record<string, unknown>, work: string, filename: string, output: string): Job {
    try {
      const checked = checkFields({ ...fields, input: `input${path.extname(filename).toLowerCase()}`, output }, "job");
      return planStages(undefined, work, checked, work)[0];
    } catch (err) {
      if (err instanceof JobError) {
        const said = err.message.replace(/^job: /, "").replace(`${err.field}: `, "");
        const message = err.field ? `job.${err.field}: ${said}` : `job: ${said}`;
        throw new InvalidRequestError(message, "invalid_dataset_job", err.field ? `job.${err.field}` : "job");
      }
      throw err;
    }
  }

  /** The dataset file into `work`, under a name that keeps its format; returns the name it was uploaded under. */
  private async download(id: string, owner: Owner, work: string): Promise<string> {
    const file = await this.deps.files.open(id, owner);
    if (!file) throw new NotFoundError("file", id, "input_file_id");
    const ext = path.extname(file.object.filename).toLowerCase();
    if (!(INPUT_FORMATS as readonly string[]).includes(ext)) {
      file.content.destroy();
      throw new InvalidRequestError(
        `File '${id}' (${file.object.filename}) is not a dataset: its name must end in ${INPUT_FORMATS.join(", ")}.`,
        "invalid_dataset",
        "input_file_id",
      );
    }
    await pipeline(file.content, createWriteStream(path.join(work, `input${ext}`)));
    return file.object.filename;
  }

  /** File `id` to `target` (none: an empty file); `required`, a file that was made and is gone is not found. */
  private async save(id: string | null | undefined, owner: Owner, target: string, required = false): Promise<void> {
    if (!id) return writeFile(target, "");
    const file = await this.deps.files.open(id, owner);
    if (!file && required) throw new NotFoundError("file", id);
    if (!file) return writeFile(target, "");
    await pipeline(file.content as Readable, createWriteStream(target));
  }

  private async text(id: string, owner: Owner): Promise<string> {
    const file = await this.deps.files.open(id, owner);
    if (!file) throw new NotFoundError("file", id);
    const chunks: Buffer[] = [];
    for await (const c of file.content) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  }

  private scratch(): Promise<string> {
    return inDir(this.deps.scratchDir, () => mkdtemp(path.join(this.deps.scratchDir, "dataset-")));
  }

  private async inScratch<T>(run: (work: string) => Promise<T>): Promise<T> {
    const work = await this.scratch();
    try {
      return await run(work);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }
}

/** A dataset batch's table asked for once a file it is joined from has been deleted or has expired. */
function tableGone(batch: Batch, what: string): InvalidRequestError {
  const answers =
    what === "output file" || !batch.output_file_id ? "" : ` Its answers are still in its output file, '${batch.output_file_id}'.`;
  return new InvalidRequestError(
    `Batch '${batch.id}' can no longer be joined back into its table: its ${what} has been deleted or has expired.${answers}`,
    "input_gone",
    null,
  );
}
