// Dataset jobs on the service: a dataset file becomes request lines (stored as the batch's input file, so the
// batch is OpenAI's to the letter) and an ordinary batch; once it ends, its answers are joined back into the
// dataset on demand. Only the Files and Batches ports are used, so both modes serve it alike. DuckDB is confined to
// each job's scratch folder: a client's `where` is SQL.
import { createWriteStream } from "node:fs";
import { mkdtemp, rm, statfs, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type pino from "pino";
import { checkFields, type Job, JobError, planStages } from "../datasets/job.js";
import { jobHash, writeRequests } from "../datasets/requests.js";
import { joinAnswers, outputColumns } from "../datasets/stage.js";
import { DatasetError, INPUT_FORMATS, type Tables } from "../datasets/tables.js";
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
import { DatasetReads } from "./dataset-reads.js";

/**
 * The longest DuckDB may work on one step of reading a client's dataset (a statement, the next chunk of rows): a
 * `where` is the client's SQL, and one that never ends would hold a create (and a core) for good.
 */
export const DATASET_STEP_SECONDS = 60;

/** Without DATASET_SCRATCH_MB, a read may spill this share of the free space on its disk as it starts. */
const SCRATCH_SHARE = 1 / 20;

/**
 * A job's tables: confined to its scratch folder, each step of a read bounded, its spill too. DuckDB's library (tens
 * of MB) loads in the process that first runs a dataset job, not in every process at start.
 */
async function jobTables(work: string, scratchMb: number) {
  const free = async () => {
    const s = await statfs(work);
    return Math.floor(s.bavail * s.bsize * SCRATCH_SHARE);
  };
  return (await import("../datasets/duckdb-tables.js")).openDuckTables({
    tempDir: work,
    confine: true,
    stepLimitMs: DATASET_STEP_SECONDS * 1000,
    maxTempBytes: scratchMb > 0 ? scratchMb * 1024 * 1024 : await free(),
  });
}

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

/** A job's field as a request names it. */
const asField = (field: string) => `job.${field}`;

interface StoredJob {
  fields: Record<string, unknown>;
  hash: string;
  rows: number;
  filename: string;
}

export class DatasetBatchService implements DatasetBatches {
  private readonly reads: DatasetReads;

  constructor(
    private readonly deps: {
      files: FileStore;
      batches: BatchService;
      scratchDir: string;
      logger: pino.Logger;
      /** DATASET_READS and DATASET_SCRATCH_MB. */
      limits: { reads: number; scratchMb: number };
    },
  ) {
    this.reads = new DatasetReads(deps.limits.reads);
  }

  async create(input: CreateDatasetBatchInput): Promise<Batch> {
    for (const key of Object.values(DATASET_METADATA)) {
      if (input.metadata?.[key] !== undefined)
        throw new InvalidRequestError(`metadata.${key} is set by the service`, "invalid_request", `metadata.${key}`);
    }
    for (const [field, why] of Object.entries(NOT_OVER_HTTP)) {
      if (input.job[field] !== undefined)
        throw new InvalidRequestError(`job.${field} is not taken here: ${why}.`, "invalid_request", `job.${field}`);
    }
    return this.reads.run(() => this.inScratch((work) => this.render(input, work)));
  }

  /** The dataset rendered in `work` into request lines, stored with the job as two files, and made into a batch. */
  private async render(input: CreateDatasetBatchInput, work: string): Promise<Batch> {
    const filename = await this.download(input.input_file_id, input.owner, work);
    const job = this.jobOf({ ...input.job, endpoint: input.endpoint }, work, filename, "table.jsonl");
    const stored = await this.withTables(work, job, filename, async (tables) => {
      const table = await tables.open(job);
      outputColumns(job, table.columns, filename, asField);
      const hash = await jobHash(job, table.files);
      const rows = await writeRequests(job, table, path.join(work, "requests.jsonl"), { hash, label: filename });
      return { fields: input.job, hash, rows, filename } satisfies StoredJob;
    });
    await writeFile(path.join(work, "job.json"), JSON.stringify(stored));
    const base = filename.replace(/\.[^.]+$/, "");
    const adopt = (name: string, suffix: string) =>
      this.deps.files.adopt({ tmpPath: path.join(work, name), filename: `${base}.${suffix}`, purpose: "batch", owner: input.owner });
    const jobFile = await adopt("job.json", "dataset-job.json");
    const linesFile = await adopt("requests.jsonl", "requests.jsonl");
    try {
      return await this.deps.batches.create({
        input_file_id: linesFile.id,
        endpoint: input.endpoint,
        completion_window: input.completion_window,
        metadata: { ...(input.metadata ?? {}), [DATASET_METADATA.input]: input.input_file_id, [DATASET_METADATA.job]: jobFile.id },
        owner: input.owner,
      });
    } catch (err) {
      // A batch refused (429, 503, a full disk) leaves none of the files made for it behind.
      for (const id of [linesFile.id, jobFile.id]) await this.deps.files.delete(id, input.owner).catch(() => undefined);
      throw err;
    }
  }

  async table(id: string, owner: Owner, format: TableFormat): Promise<DatasetTable> {
    const batch = await this.deps.batches.get(id, owner);
    if (!batch) throw new NotFoundError("batch", id);
    const inputId = batch.metadata?.[DATASET_METADATA.input];
    const jobId = batch.metadata?.[DATASET_METADATA.job];
    if (!inputId || !jobId)
      throw new InvalidRequestError(`Batch '${id}' was not made from a dataset (POST /v1/dataset_batches).`, "not_a_dataset_batch");
    if (!isFinal(batch.status))
      throw new InvalidRequestError(`Batch '${id}' is ${batch.status}: its table exists once it ends.`, "batch_not_finished");
    return this.reads.run(async () => {
      const work = await this.scratch();
      try {
        const joined = await this.join(batch, { inputId, jobId, owner, format }, work);
        return { ...joined, contentType: CONTENT_TYPES[format], remove: () => rm(work, { recursive: true, force: true }) };
      } catch (err) {
        await rm(work, { recursive: true, force: true });
        throw err;
      }
    });
  }

  /** The ended batch's answers joined in `work` into its dataset, as `format`. */
  private async join(
    batch: Batch,
    o: { inputId: string; jobId: string; owner: Owner; format: TableFormat },
    work: string,
  ): Promise<{ path: string; filename: string }> {
    const stored = JSON.parse(await this.text(o.jobId, o.owner)) as StoredJob;
    const filename = await this.download(o.inputId, o.owner, work);
    const output = path.join(work, "output.jsonl");
    const errors = path.join(work, "errors.jsonl");
    await this.save(batch.output_file_id, o.owner, output);
    await this.save(batch.error_file_id, o.owner, errors);
    const earlier = await this.retried(batch, o.owner, work);
    const table = `${stored.filename.replace(/\.[^.]+$/, "")}.${o.format}`;
    const job = this.jobOf({ ...stored.fields, endpoint: batch.endpoint }, work, filename, table);
    await this.withTables(work, job, filename, async (tables) => {
      const input = await tables.open(job);
      const columns = outputColumns(job, input.columns, filename, asField);
      await joinAnswers(job, tables, input, { columns, rows: stored.rows, hash: stored.hash, output, errors, earlier, work }).catch(
        (err) => {
          if (err instanceof DatasetError && /has no result yet/.test(err.message))
            throw new InvalidRequestError(
              `Batch '${batch.id}' ended ${batch.status} before its lines ran: it has no table.`,
              "batch_not_run",
            );
          throw err;
        },
      );
    });
    return { path: job.output, filename: table };
  }

  /**
   * `use` over the job's tables in `work`, closed after; a fault of the dataset or the job is the client's request's
   * (a 400 naming the file by its uploaded name), and what it leaves out of a client's SQL error goes to the log.
   */
  private async withTables<T>(work: string, job: Job, filename: string, use: (tables: Tables) => Promise<T>): Promise<T> {
    const tables = await jobTables(work, this.deps.limits.scratchMb);
    try {
      return await use(tables);
    } catch (err) {
      if (!(err instanceof DatasetError || err instanceof JobError)) throw err;
      if (err instanceof DatasetError && err.detail !== undefined)
        this.deps.logger.info(
          { where: job.where, duckdb: err.detail },
          "a dataset's where was refused; the client was told its clause and kind",
        );
      throw new InvalidRequestError(err.message.replaceAll(job.input, filename), "invalid_dataset");
    } finally {
      await tables.close();
    }
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

  private async save(id: string | null | undefined, owner: Owner, target: string): Promise<void> {
    if (!id) return writeFile(target, "");
    const file = await this.deps.files.open(id, owner);
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
