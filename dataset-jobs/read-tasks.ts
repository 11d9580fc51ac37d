// What a dataset read's own process runs (dataset-jobs/read-child.ts), and what it says back: a dataset rendered
// into request lines, or an ended batch's answers joined back into it, by DuckDB confined to the read's scratch
// folder. Errors cross the process boundary as plain objects and are made the same errors again on the other side.
import path from "node:path";
import type { LimitNames } from "../datasets/duckdb-errors.js";
import { type Job, JobError } from "../datasets/job.js";
import { jobHash, type RequestSizes, writeRequests } from "../datasets/requests.js";
import { joinAnswers, outputColumns } from "../datasets/stage.js";
import { DatasetError, type Tables } from "../datasets/tables.js";

export interface ReadLimits {
  stepMs: number;
  /** DuckDB's own buffer limit, within the process's. */
  duckMemoryMb: number;
  maxTempBytes: number;
  names: LimitNames;
}

interface TaskBase {
  /** The read's scratch folder: the dataset, the files it writes, DuckDB's spill; nothing else is reachable. */
  work: string;
  job: Job;
  /** The dataset's name as it was uploaded, which errors name. */
  filename: string;
  limits: ReadLimits;
}

/** The dataset rendered into `work`/requests.jsonl: lines no longer than MAX_LINE_BYTES, no more than MAX_FILE_BYTES. */
export interface RenderTask extends TaskBase {
  kind: "render";
  sizes: RequestSizes;
}

/** The answers joined into `job.output`. */
export interface JoinTask extends TaskBase {
  kind: "join";
  rows: number;
  hash: string;
  output: string;
  errors: string;
  earlier: Array<{ output: string; errors: string }>;
}

export type ReadTask = RenderTask | JoinTask;

export interface Rendered {
  hash: string;
  rows: number;
}

/** An error as it crosses between the processes. */
export interface SentError {
  name: string;
  message: string;
  detail?: string;
  field?: string;
  bound?: "memory" | "time";
}

export type ParentMessage = { type: "task"; task: ReadTask };
export type ChildMessage =
  | { type: "step"; running: boolean }
  | { type: "done"; value: Rendered | null }
  | { type: "failed"; error: SentError };

/** A job's field as a request names it. */
export const asField = (field: string) => `job.${field}`;

async function openTables(task: ReadTask, onStep: (running: boolean) => void): Promise<Tables> {
  // DuckDB's library (tens of MB) loads only in a read's process.
  const { openDuckTables } = await import("../datasets/duckdb-tables.js");
  return openDuckTables({
    tempDir: task.work,
    confine: true,
    memoryLimit: `${task.limits.duckMemoryMb}MB`,
    stepLimitMs: task.limits.stepMs,
    maxTempBytes: task.limits.maxTempBytes,
    onStep,
    limitNames: task.limits.names,
  });
}

/** Runs `task`; `onStep` is told as each of DuckDB's steps starts and ends. */
export async function runTask(task: ReadTask, onStep: (running: boolean) => void): Promise<Rendered | null> {
  const { job, filename } = task;
  const tables = await openTables(task, onStep);
  try {
    const input = await tables.open(job);
    const columns = outputColumns(job, input.columns, filename, asField);
    if (task.kind === "render") {
      const hash = await jobHash(job, input.files);
      const { rows } = await writeRequests(job, input, path.join(task.work, "requests.jsonl"), {
        hash,
        label: filename,
        sizes: task.sizes,
      });
      return { hash, rows };
    }
    const { rows, hash, output, errors, earlier, work } = task;
    await joinAnswers(job, tables, input, { columns, rows, hash, output, errors, earlier, work });
    return null;
  } finally {
    await tables.close();
  }
}

export function sendable(err: unknown): SentError {
  if (err instanceof DatasetError) return { name: err.name, message: err.message, detail: err.detail, field: err.field, bound: err.bound };
  if (err instanceof JobError) return { name: err.name, message: err.message, field: err.field };
  return { name: "Error", message: err instanceof Error ? (err.stack ?? err.message) : String(err) };
}

export function received(e: SentError): Error {
  if (e.name === "DatasetError") return new DatasetError(e.message, e.detail, e.field, e.bound);
  if (e.name === "JobError") return new JobError(e.message, e.field);
  return new Error(`a dataset read's process failed: ${e.message}`);
}
