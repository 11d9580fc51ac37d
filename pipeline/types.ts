// Contracts of the pipeline: validation of a batch file and the run of a validated file over a backend.
import type { Endpoint, InferenceBackend, TokenUsage } from "../openai/backend.js";
import type { LineOrder } from "./schedule.js";
import type { TokenCounter } from "./token-estimate.js";

export type { Endpoint, TokenUsage };

/** Lines answered without running (each counted once, as completed lines are), and their answers' output tokens. */
export interface CachedWork {
  lines: number;
  outputTokens: number;
}

export interface LineError {
  code: string;
  message: string;
  /** 1-based line number in the input file. */
  line: number | null;
  param?: string | null;
}

export interface ValidationLimits {
  maxRequests: number;
  maxLineBytes: number;
  /** Report at most this many line errors (the rest are counted, not listed). */
  maxErrors?: number;
  /** False where lines may name different models (Anthropic's message batches); default true, as OpenAI has it. */
  oneModel?: boolean;
  /** Counts the prompt tokens of the enqueued-token estimate (pipeline/token-estimate.ts) where it can. */
  countTokens?: TokenCounter;
}

export interface ValidationResult {
  ok: boolean;
  total: number;
  /** The first `maxErrors` problems. */
  errors: LineError[];
  /** All problems found, listed or not. */
  errorCount: number;
  /** The `model` named by the lines (the first one seen), if any, and the line naming it first. */
  model?: string;
  modelLine?: number;
  /** Every model named, each with the line naming it first. */
  models?: Array<{ model: string; line: number }>;
  /** The lines' estimated tokens (prompt and the most each may generate), by the model each names ("": none). */
  enqueuedTokens?: Record<string, number>;
}

export interface Progress {
  completed: number;
  failed: number;
  usage: TokenUsage;
  /** Of the completed lines, those answered without running (a repeat in flight, a result cache hit). */
  cached?: CachedWork;
  /** The lines this run looked at (none of a resumed run's earlier lines), for a stop rule's error rate. */
  sample?: LineSample;
}

/**
 * A run's lines by how they went: refused before they began on the backend (a body it cannot honour, a prompt too
 * long for the context), or begun; of those begun, how many ended and how many of those failed.
 */
export interface LineSample {
  /** Refused before any line of the run that began had ended: those the order put first (the longest prompts). */
  early: number;
  /** Refused since: looked at at the pace of the lines that run. */
  refused: number;
  begun: number;
  ended: number;
  failed: number;
}

/**
 * Why a run stops early. Cancel, expiry and a failure of the batch write an error line with this
 * code for every request that did not finish; "shutdown" writes nothing so a restart resumes where it stopped.
 */
export interface AbortReason {
  code: "batch_cancelled" | "batch_expired" | "batch_failed" | "model_not_found" | "shutdown";
  message: string;
}

export interface RunBatchOptions {
  /** A validated OpenAI-line JSONL file. */
  inputPath: string;
  /** Both are appended to (a resumed run keeps what is there). */
  outputPath: string;
  errorPath: string;
  endpoint: Endpoint;
  /** Absent only for a run that is already aborted: it writes the lines of what will not run. */
  backend?: InferenceBackend;
  /** Requests grouped per map-batches step. */
  batchSize: number;
  /** Requests in flight at once; 0: what the backend asks for (BackendInfo.concurrency). */
  concurrency: number;
  /** custom_ids whose result is already on disk: never run again. */
  done?: ReadonlySet<string>;
  /** Counts and usage already on disk (resume.ts scanDone); progress and the result start from them. */
  base?: Progress;
  /** Abort with an AbortReason as `signal.reason`. */
  signal?: AbortSignal;
  /**
   * Graceful stop (a pause, a cancel's grace, a preemption, a yield, a shutdown, the runner's Ctrl-C): no new
   * request starts, those that began on the backend (ExecuteOptions.onBegin) finish and are written, and those
   * still waiting for their turn (a sequence, a context, an upstream's room) are called off, unrun. With a shutdown
   * (or no AbortReason) as its reason the run ends with "shutdown" and nothing is written for the rest; with a
   * cancel the rest get that reason's line. `signal` still cuts it short.
   */
  drain?: AbortSignal;
  onProgress?: (p: Progress) => void;
  /**
   * Durable progress: the result files are flushed to stable storage (fdatasync) at most this often, and
   * `onProgress` then hears only what was flushed, so nothing counted can be lost to a power cut. Absent: every
   * result is reported as it is written.
   */
  syncEveryMs?: number;
  /** Transient backend errors are retried with exponential backoff and jitter. */
  retry?: { attempts: number; baseDelayMs: number };
  /**
   * The order lines start in: "cost" (default), the costliest first with prefix families together
   * (schedule.ts), unless the backend prefers another; "interleave", families taking turns; "file", as they stand
   * in the file.
   */
  order?: LineOrder;
  /**
   * Every body was checked as parseRequest checks it before the run (a dataset job's request lines): the result
   * cache is asked by the body as it was written, which such a check leaves as it is (the body schemas hold no
   * transform, default or stripping object, tests/parse/checked-bodies.unit.test.ts), saving a second check per line.
   */
  bodiesChecked?: boolean;
}

export interface RunBatchResult extends Progress {
  /** Set when the run stopped early. */
  aborted?: AbortReason;
}
