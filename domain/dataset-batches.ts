// A dataset file made into a batch, and the finished batch made back into the dataset with its answers: the
// service's side of dataset jobs (docs/datasets.md), an extension beside OpenAI's batches.
import type { Batch, BatchEndpoint } from "./objects.js";
import type { Owner } from "./ports.js";

export const TABLE_FORMATS = ["parquet", "csv", "tsv", "jsonl"] as const;
export type TableFormat = (typeof TABLE_FORMATS)[number];

/** The metadata keys that tie a batch to its dataset; a client may not set them itself. */
export const DATASET_METADATA = { input: "dataset_input_file_id", job: "dataset_job_file_id" } as const;

/** A dataset read stopped because its client went away before it could be answered. */
export class ClientGoneError extends Error {
  constructor() {
    super("the client closed its connection before its dataset read was answered");
    this.name = "ClientGoneError";
  }
}

export interface CreateDatasetBatchInput {
  /** A dataset file uploaded with purpose `batch`; its name's extension tells its format. */
  input_file_id: string;
  endpoint: BatchEndpoint;
  completion_window: string;
  metadata?: Record<string, string> | null;
  /** The job's fields (docs/datasets.md) but its files: the template, parameters, filter and kept columns. */
  job: Record<string, unknown>;
  owner: Owner;
}

export interface DatasetTable {
  /** A local file holding the table, removed by `remove()` once sent. */
  path: string;
  filename: string;
  contentType: string;
  remove(): Promise<void>;
}

export interface DatasetBatches {
  /**
   * Renders the dataset into request lines, stores them as the batch's input file, and creates the batch. `gone`,
   * aborted when the client has gone, stops the work and leaves no batch: a create either answers or creates nothing.
   */
  create(input: CreateDatasetBatchInput, gone?: AbortSignal): Promise<Batch>;
  /** A batch made by `create`, once ended, as its dataset with the answers' columns; `gone` as for `create`. */
  table(id: string, owner: Owner, format: TableFormat, gone?: AbortSignal): Promise<DatasetTable>;
}
