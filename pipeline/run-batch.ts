// Runs a validated batch file over an inference backend: stream the lines, parse each body, let the backend
// refuse what it cannot honour, run the rest, and append one OpenAI batch output line per request to the
// output or the error file. A bad body fails its own line (status 400, the field named), never the batch.
import { getMaxListeners, setMaxListeners } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import type { BackendResult, Endpoint, InferenceBackend, InferenceRequest } from "../openai/backend.js";
import { RequestError } from "../openai/errors.js";
import { hexId } from "../openai/ids.js";
import { parseRequest } from "../parse/request.js";
import { AnsweredAhead } from "./answered-ahead.js";
import { callOffUnbegun, NotBegun } from "./call-off.js";
import { ComputeGate } from "./compute-gate.js";
import { type JsonlAppender, openJsonlAppender, readJsonlLines } from "./jsonl.js";
import { mapBatches, type Outcome } from "./map-batches.js";
import { plannedLines, type SourceLine } from "./schedule.js";
import type { AbortReason, LineSample, Progress, RunBatchOptions, RunBatchResult } from "./types.js";
import { addUsage, emptyUsage } from "./usage.js";

export const DEFAULT_RETRY = { attempts: 3, baseDelayMs: 250 };

const DRAINED: AbortReason = { code: "shutdown", message: "The run was drained for a shutdown; it resumes on restart." };
const MAX_RETRY_DELAY_MS = 30_000;

interface BatchRequest {
  lineNo: number;
  customId: string | null;
  body: unknown;
  /** Set for a line that is not a request object (only possible when validation was skipped). */
  unparseable?: string;
  /** Set once it began on the backend: a failure then is the run's, not a refusal. */
  begun?: boolean;
}

export async function runBatchFile(opts: RunBatchOptions): Promise<RunBatchResult> {
  const { backend, endpoint, signal } = opts;
  if (!backend && !signal?.aborted) throw new Error("runBatchFile: a run without a backend must be aborted");
  const retry = opts.retry ?? DEFAULT_RETRY;
  // Concurrent runs share the backend's own wait list (the engine's is FIFO), so each gets its turn.
  const { concurrency, gate } = inFlightFor(opts.concurrency, backend);
  const tries: Tries = { backend: backend!, endpoint, retry, drain: opts.drain, gate };
  // Every request in flight listens for the drain while it waits for its turn on the backend: not a leak.
  if (opts.drain) setMaxListeners(Math.max(getMaxListeners(opts.drain), concurrency + 10), opts.drain);
  const progress = progressFrom(opts.base);
  const tally = new Tally();
  const snapshot = (): Progress => Object.assign(snapshotOf(progress), { sample: { ...tally.sample } });
  const output = lazyAppender(opts.outputPath);
  const errors = lazyAppender(opts.errorPath);
  // Called after every request (a copy, so the caller may keep it; the caller throttles any slow work), or with
  // syncEveryMs once what it counts is on stable storage.
  const durable = opts.syncEveryMs ? groupSyncs(opts.syncEveryMs, [output, errors], snapshot, opts.onProgress) : undefined;
  const reportProgress = () => (durable ? durable.dirty() : opts.onProgress?.(snapshot()));
  const writeFailure = async (line: object) => {
    await errors.append(line);
    progress.failed++;
    reportProgress();
  };

  // Lines a drain sent back before they began: they did not run, so the run did not end.
  let sentBack = 0;
  const onResult = async (req: BatchRequest, outcome: Outcome<BackendResult>) => {
    if (outcome.ok) {
      tally.ended(req, true);
      await output.append(successLine(req.customId, outcome.value.body, outcome.value.cached));
      countCompleted(progress, outcome.value);
      reportProgress();
    } else if ((signal?.aborted && !isRequestFailure(outcome.error)) || outcome.error instanceof NotBegun) {
      // Stopped by the abort or the drain, not failed by itself: it did not run.
      if (!signal?.aborted) sentBack++;
      const reason = abortReasonOf(signal?.aborted ? signal : opts.drain!);
      if (reason.code !== "shutdown") await writeFailure(abortedLine(req.customId, reason));
    } else {
      tally.ended(req, false);
      await writeFailure(failureLine(req.customId, outcome.error));
    }
  };

  const { source, ahead } = await requestsOf(opts, (req, result) => onResult(req, { ok: true, value: result }));
  try {
    const run = await mapBatches(source, {
      batchSize: opts.batchSize,
      concurrency,
      signal,
      drain: opts.drain,
      onResult,
      fn: (req, sig) => runRequest(tries, req, sig, () => tally.began(req)),
    });
    if (!run.aborted && sentBack === 0) return snapshotOf(progress);
    // Drained (signal untouched): the requests in flight finished. A drain for a shutdown leaves the rest to
    // resume on restart; a drain with a reason of its own (a cancel) ends the rest with it.
    const reason = signal?.aborted ? abortReasonOf(signal) : opts.drain?.aborted ? abortReasonOf(opts.drain) : DRAINED;
    // Cancel, expiry and a failed batch are final: every request that did not finish gets its line, so
    // completed + failed == total. A shutdown writes nothing more; the restart resumes.
    if (reason.code !== "shutdown") {
      for (const req of run.unstarted) await writeFailure(abortedLine(req.customId, reason));
      for await (const req of source) await writeFailure(abortedLine(req.customId, reason));
    }
    return { ...snapshotOf(progress), aborted: reason };
  } finally {
    await source.return(undefined);
    await ahead?.close();
    // What was written is flushed (and reported) before the files close; a sync that fails fails the run.
    try {
      await durable?.close();
    } finally {
      await Promise.all([output.close(), errors.close()]);
    }
  }
}

/**
 * Lines in flight over a backend whose result cache commits across a network (PostgreSQL's), as a multiple of its own
 * concurrency: a line holds its place until its answer is stored, and the lines waiting on a store's transaction
 * would otherwise leave the engine idle. A 50,000-line batch of one-token answers over three workers and
 * PostgreSQL's cache ran in 72 s at the backend's concurrency, 65 s at twice it, 42 s at four times it, 49 s at eight
 * (the stores' transactions grow with their groups), and 34 s with the cache off. Over the embedded store a commit is
 * a local flush: 2,000-line batches over an empty one took 2.9% longer than with the cache off at four times, the
 * same as off at the backend's own concurrency (four batches each, interleaved).
 */
const STORING_IN_FLIGHT = 4;

/**
 * The lines a run keeps in flight: as many as it is told (PIPELINE_CONCURRENCY), else the backend's concurrency, more
 * where it stores across a network. Those more lines compute no more at once than the backend's concurrency: the
 * rest wait their turn in the run, not in the backend's wait list (compute-gate.ts).
 */
function inFlightFor(told: number, backend: InferenceBackend | undefined): { concurrency: number; gate?: ComputeGate } {
  if (told > 0) return { concurrency: told };
  const own = backend?.info.concurrency ?? 1;
  return backend?.storesRemotely ? { concurrency: own * STORING_IN_FLIGHT, gate: new ComputeGate(own) } : { concurrency: own };
}

/** Where a run resumes counting from: what its earlier runs counted, or nothing. */
const progressFrom = (base: RunBatchOptions["base"]): Progress => ({
  completed: base?.completed ?? 0,
  failed: base?.failed ?? 0,
  usage: { ...(base?.usage ?? emptyUsage()) },
  cached: { lines: base?.cached?.lines ?? 0, outputTokens: base?.cached?.outputTokens ?? 0 },
});

/**
 * The run's requests, blank and done lines left out. Where the backend has a result cache, a reader answers the lines
 * it holds ahead of the pipeline (`answered`), and the requests are the others (pipeline/answered-ahead.ts).
 */
async function requestsOf(
  opts: RunBatchOptions,
  answered: (req: BatchRequest, result: BackendResult) => Promise<void>,
): Promise<{ source: AsyncGenerator<BatchRequest>; ahead?: AnsweredAhead<BatchRequest> }> {
  const { backend, endpoint, signal, drain } = opts;
  const done = opts.done ?? new Set<string>();
  if (!backend?.answerFromCache) return { source: readRequests(await linesOf(opts), done) };
  const lookup = cacheLookup(backend, endpoint, opts.bodiesChecked === true);
  const answer = async (req: BatchRequest) => {
    const result = await lookup(req);
    if (result) await answered(req, result);
    return result !== undefined;
  };
  const ahead = new AnsweredAhead<BatchRequest>(answer, () => signal?.aborted === true || drain?.aborted === true);
  ahead.start(readRequests(readJsonlLines(opts.inputPath), done));
  return { source: ahead.toRun(readRequests(unanswered(opts, ahead), done)), ahead };
}

/** The lines planned once the reader is through the file: those the cache did not answer (none: nothing is read). */
async function* unanswered(opts: RunBatchOptions, ahead: AnsweredAhead<BatchRequest>): AsyncGenerator<SourceLine> {
  await ahead.readThrough();
  if (ahead.answeredAll()) return;
  yield* await linesOf(opts, (lineNo) => ahead.isAnswered(lineNo));
}

/**
 * The lines in the order they start: the default defers to the backend's preference (an upstream's prefix routing).
 * `skip`: lines left out of the plan by their number.
 */
async function linesOf(opts: RunBatchOptions, skip?: (lineNo: number) => boolean): Promise<AsyncIterable<SourceLine>> {
  const { backend, done } = opts;
  const order = (opts.order ?? "cost") === "cost" ? ((await backend?.lineOrder?.()) ?? { order: "cost" }) : { order: opts.order! };
  if (order.order === "file") return readJsonlLines(opts.inputPath);
  return plannedLines(
    opts.inputPath,
    opts.endpoint,
    (value) => !done?.has((value as { custom_id?: unknown } | null)?.custom_id as string),
    { preference: order, ...(backend?.prepareRun ? { onShape: (shape) => backend.prepareRun!(shape) } : {}), ...(skip ? { skip } : {}) },
  );
}

/** The run's lines by how they went (LineSample), for a stop rule's error rate. */
class Tally {
  readonly sample: LineSample = { early: 0, refused: 0, begun: 0, ended: 0, failed: 0 };

  began(req: BatchRequest): void {
    if (req.begun) return;
    req.begun = true;
    this.sample.begun++;
  }

  /** A line that ended by itself: one that failed before it began was refused. */
  ended(req: BatchRequest, ok: boolean): void {
    // A line may complete without taking a sequence (max_tokens 0): it ran all the same.
    if (ok) this.began(req);
    if (!req.begun) {
      if (this.sample.ended === 0) this.sample.early++;
      else this.sample.refused++;
      return;
    }
    this.sample.ended++;
    if (!ok) this.sample.failed++;
  }
}

/**
 * Flushes the result files at most every `everyMs` while results arrive, then reports the progress as it was
 * when the flush began: only lines on stable storage are ever counted. One flush at a time.
 */
function groupSyncs(everyMs: number, files: JsonlAppender[], snapshot: () => Progress, onProgress?: (p: Progress) => void) {
  let timer: NodeJS.Timeout | undefined;
  let syncing: Promise<void> | undefined;
  let failure: unknown;
  let pending = false;
  let closing = false;
  const flush = () => {
    pending = false;
    const p = snapshot();
    syncing = Promise.all(files.map((f) => f.sync()))
      .then(() => onProgress?.(p))
      .catch((err) => {
        failure ??= err;
      })
      .finally(() => {
        syncing = undefined;
        if (pending) schedule();
      });
    return syncing;
  };
  const schedule = () => {
    // Once closing, the last flush is close()'s own: a timer set by a flush ending then would sync closed files.
    if (timer || syncing || closing) return;
    timer = setTimeout(() => {
      timer = undefined;
      void flush();
    }, everyMs);
  };
  return {
    dirty() {
      pending = true;
      schedule();
    },
    async close() {
      closing = true;
      clearTimeout(timer);
      timer = undefined;
      await syncing;
      await flush();
      if (failure) throw failure;
    },
  };
}

/** Lines of the input as requests, blank lines and already-done custom_ids left out. */
async function* readRequests(lines: AsyncIterable<SourceLine>, done: ReadonlySet<string>): AsyncGenerator<BatchRequest> {
  for await (const line of lines) {
    if (line.text.trim() === "") continue;
    let value: any;
    try {
      value = JSON.parse(line.text);
    } catch {
      yield { lineNo: line.lineNo, customId: null, body: undefined, unparseable: `Line ${line.lineNo} is not valid JSON.` };
      continue;
    }
    const customId = typeof value?.custom_id === "string" ? value.custom_id : null;
    if (customId !== null && done.has(customId)) continue;
    if (customId === null) {
      yield { lineNo: line.lineNo, customId, body: undefined, unparseable: `Line ${line.lineNo} has no string custom_id.` };
      continue;
    }
    yield { lineNo: line.lineNo, customId, body: value.body };
  }
}

/**
 * The line's answer where the result cache holds it, read without a turn on the backend; undefined where it must
 * run (a miss, or a body that fails its parse or check, whose 400 the run then writes).
 */
function cacheLookup(backend: InferenceBackend, endpoint: Endpoint, bodiesChecked: boolean) {
  return async (req: BatchRequest): Promise<BackendResult | undefined> => {
    if (req.unparseable) return undefined;
    let request: InferenceRequest;
    try {
      request = bodiesChecked ? ({ endpoint, body: req.body } as InferenceRequest) : parseRequest(endpoint, req.body);
      backend.check(request);
    } catch {
      return undefined;
    }
    return backend.answerFromCache!(request);
  };
}

/** What every line's tries share in a run. */
interface Tries {
  backend: InferenceBackend;
  endpoint: Endpoint;
  retry: { attempts: number; baseDelayMs: number };
  drain: AbortSignal | undefined;
  /** Bounds the lines computing at once, where more are in flight (computeGate). */
  gate: ComputeGate | undefined;
}

/** Parse, check, run: the first two throw the line's own 400, which is never retried. */
async function runRequest(tries: Tries, req: BatchRequest, signal: AbortSignal, onBegin: () => void): Promise<BackendResult> {
  if (req.unparseable) throw new RequestError(req.unparseable, "invalid_request", false);
  const request = parseRequest(tries.endpoint, req.body);
  tries.backend.check(request);
  return withRetry(() => attempt(tries, request, signal, onBegin), tries.retry, signal, tries.drain);
}

/**
 * One try. Only what has begun on the backend runs on through a drain: a try still waiting for its turn (a
 * sequence, an upstream's room) when the drain comes is called off, and the line goes back unrun (call-off.ts).
 */
function attempt(
  { backend, drain, gate }: Tries,
  request: InferenceRequest,
  signal: AbortSignal,
  onBegin: () => void,
): Promise<BackendResult> {
  const execute = async (s: AbortSignal, begun: () => void) => {
    const release = await gate?.acquire(s);
    try {
      return await backend.execute(request, s, { onBegin: begun, waitForStore: true, ...(release ? { onBackendDone: release } : {}) });
    } finally {
      release?.();
    }
  };
  return drain ? callOffUnbegun(drain, signal, execute, onBegin) : execute(signal, onBegin);
}

/** Transient backend errors get more tries, with exponential backoff and full jitter; a drain ends the waiting. */
async function withRetry<T>(
  run: () => Promise<T>,
  retry: { attempts: number; baseDelayMs: number },
  signal: AbortSignal,
  drain?: AbortSignal,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (!(err instanceof RequestError) || !err.retryable || attempt >= retry.attempts || signal.aborted) throw err;
      const cap = Math.min(MAX_RETRY_DELAY_MS, retry.baseDelayMs * 2 ** attempt);
      await sleep(Math.random() * cap, undefined, { signal: drain ? AbortSignal.any([signal, drain]) : signal }).catch((e) => {
        throw drain?.aborted && !signal.aborted ? new NotBegun(drain.reason) : e;
      });
      if (drain?.aborted) throw new NotBegun(drain.reason);
    }
  }
}

/** A failure that belongs to the request itself, not to the abort that interrupted it. */
const isRequestFailure = (err: unknown) => err instanceof RequestError && !err.retryable;

function abortReasonOf(signal: AbortSignal): AbortReason {
  const r = signal.reason as Partial<AbortReason> | undefined;
  if (r && (["batch_cancelled", "batch_expired", "batch_failed", "model_not_found", "shutdown"] as unknown[]).includes(r.code)) {
    return { code: r.code as AbortReason["code"], message: typeof r.message === "string" ? r.message : String(r.code) };
  }
  // An abort without our reason is treated as a stop to resume from, which loses nothing.
  return { code: "shutdown", message: "The run was stopped." };
}

/** A completed line in the progress: its usage, and whether it was answered without running. */
function countCompleted(progress: Progress, { usage, cached }: BackendResult): void {
  progress.completed++;
  addUsage(progress.usage, usage);
  if (!cached) return;
  progress.cached!.lines++;
  progress.cached!.outputTokens += usage.completionTokens;
}

const snapshotOf = (p: Progress): Progress => ({ ...p, usage: { ...p.usage }, cached: { ...p.cached! } });

/**
 * A line's result; one answered without running says how (`cached`, an extension field: "duplicate" or "hit"), which
 * is what a resumed run and a checkpoint count its cached lines by.
 */
function successLine(customId: string | null, body: object, cached?: "duplicate" | "hit") {
  return {
    id: `batch_req_${hexId()}`,
    custom_id: customId,
    response: { status_code: 200, request_id: `req_${hexId()}`, body },
    error: null,
    ...(cached ? { cached } : {}),
  };
}

function failureLine(customId: string | null, err: unknown) {
  if (err instanceof RequestError && err.upstream) {
    const { status, body } = err.upstream;
    return {
      id: `batch_req_${hexId()}`,
      custom_id: customId,
      response: { status_code: status, request_id: `req_${hexId()}`, body },
      error: null,
    };
  }
  const permanent = isRequestFailure(err);
  const e = err as { message?: unknown; code?: unknown; param?: unknown };
  const error = {
    message: typeof e?.message === "string" ? e.message : String(err),
    type: permanent ? "invalid_request_error" : "server_error",
    param: typeof e?.param === "string" ? e.param : null,
    code: typeof e?.code === "string" ? e.code : permanent ? "invalid_request" : "server_error",
  };
  return {
    id: `batch_req_${hexId()}`,
    custom_id: customId,
    response: { status_code: permanent ? 400 : 500, request_id: `req_${hexId()}`, body: { error } },
    error: null,
  };
}

function abortedLine(customId: string | null, reason: AbortReason) {
  return { id: `batch_req_${hexId()}`, custom_id: customId, response: null, error: { code: reason.code, message: reason.message } };
}

/** Opens the file on the first line, so a run without failures leaves no empty error file behind. */
function lazyAppender(path: string): JsonlAppender {
  let opened: Promise<JsonlAppender> | undefined;
  return {
    async append(value) {
      opened ??= openJsonlAppender(path);
      await (await opened).append(value);
    },
    async sync() {
      // A file that never opened holds no line to flush (its error was already thrown by append).
      const appender = await opened?.catch(() => undefined);
      await appender?.sync();
    },
    async close() {
      // A file that never opened has nothing to flush (and its error was already thrown by append).
      const appender = await opened?.catch(() => undefined);
      await appender?.close();
    },
  };
}
