// A dataset job's answers remembered whole in the result cache, beside each row's own: a job run again on the same
// input (by content) with the same requests and the same models reads its result columns from one entry, instead of
// rendering each row's request, reading its answer and joining it. Only a job whose every request is deterministic
// (cache/rule.ts, the rule each row's answer is remembered by) and which has no module of its own (a preprocess or
// postprocess may change what no key sees) is remembered so. Its rows are told as hits are: all of their prompt
// tokens cached.
import { readFile, stat } from "node:fs/promises";
import type pino from "pino";
import { knownIdentities, loadRegistry } from "../backends/build.js";
import { sha256Hex } from "../cache/digest.js";
import { fileDigest } from "../cache/model-identity.js";
import { digestsFile, openEmbeddedCache } from "../cache/open.js";
import type { StoredAnswer } from "../cache/port.js";
import { canonicalJson, isDeterministic } from "../cache/rule.js";
import type { Config } from "../config/config.js";
import type { Job } from "../datasets/job.js";
import { requestFields } from "../datasets/requests.js";
import type { ResultColumn } from "../datasets/results.js";
import type { InferenceRequest } from "../openai/backend.js";
import { RUNNER_SCOPE } from "./run-file.js";

/** What the entry's body says it is; its version changes with the result columns' making. */
const KIND = "dataset.results";
const VERSION = 1;
/** A job whose requests or results pass this is not remembered whole: its rows' answers still are. */
const MAX_RESULTS_BYTES = 64 * 1024 * 1024;

/** A job's answers as remembered: its result columns, one JSON object per row in input order. */
export interface JobAnswers {
  rows: number;
  columns: ResultColumn[];
  /** The results file's text, each row told as a hit (cached_tokens = prompt_tokens). */
  results: string;
  usage: { promptTokens: number; completionTokens: number };
}

/** What a job's answers are a function of, but for the models' identities, known once its input is open. */
export interface JobSource {
  job: Job;
  /** The input files' content digests, in order. */
  inputs: string[];
  /** What answers the rows (runner/served-by.ts). */
  served: string;
}

/** Whether a job's answers may be remembered whole: no module of its own, run here with the result cache on. */
export const rememberable = (job: Job, config: Config, how: { remote?: unknown; retryFailed?: boolean }) =>
  config.resultCache.enabled && !how.remote && !how.retryFailed && !job.preprocess && !job.postprocess;

/** The job's source: its input files by content (hashed once per version of a file, as model files are). */
export async function jobSource(job: Job, files: readonly string[], served: string, batchDir: string): Promise<JobSource> {
  const inputs = await Promise.all(files.map((f) => fileDigest(f, digestsFile(batchDir))));
  return { job, inputs, served };
}

/** The job's answers, where the cache holds them for this source and these models; undefined on any miss. */
export async function recallAnswers(source: JobSource, config: Config, logger: pino.Logger): Promise<JobAnswers | undefined> {
  return withCache(config, logger, async (opened) => {
    const key = await keyOf(source, config, opened, logger);
    return key ? answersOf(await opened.cache.get(RUNNER_SCOPE, key)) : undefined;
  }).catch(() => undefined);
}

/**
 * Remembers the answers of a job that ran whole (no row failed): `requests` and `results` are its working files.
 * A job with a request that is not deterministic, or too large, is not; a store that fails costs the next run its
 * shortcut, never this one.
 */
export async function rememberAnswers(
  source: JobSource,
  files: { requests: string; results: string; columns: ResultColumn[]; rows: number },
  config: Config,
  logger: pino.Logger,
): Promise<void> {
  await remember(source, files, config, logger).catch((err: Error) =>
    logger.warn({ err: err.message }, "the job's answers could not be remembered whole: each row's still is"),
  );
}

async function remember(source: JobSource, files: Parameters<typeof rememberAnswers>[1], config: Config, logger: pino.Logger) {
  const sizes = await Promise.all([files.requests, files.results].map((f) => stat(f).then((s) => s.size)));
  if (sizes.some((size) => size > MAX_RESULTS_BYTES)) return;
  if (!everyDeterministic(source.job, await readFile(files.requests, "utf8"))) return;
  const told = toldAsHits(await readFile(files.results, "utf8"));
  await withCache(config, logger, async (opened) => {
    const key = await keyOf(source, config, opened, logger);
    if (!key) return;
    const body = { object: KIND, version: VERSION, rows: files.rows, columns: files.columns, results: told.text };
    await opened.cache.put(RUNNER_SCOPE, key, { body, usage: { ...told.usage, cachedTokens: told.usage.promptTokens } });
  });
}

type Opened = Awaited<ReturnType<typeof openEmbeddedCache>>;

async function withCache<T>(config: Config, logger: pino.Logger, use: (opened: Opened) => Promise<T>): Promise<T> {
  const opened = await openEmbeddedCache(config.batchDir, config.resultCache);
  if (opened.damaged) logger.warn(opened.damaged);
  try {
    return await use(opened);
  } finally {
    await opened.cache.close();
  }
}

/** The entry's key: the source and every model's identity (undefined where one is not known without a load). */
async function keyOf(source: JobSource, config: Config, opened: Opened, logger: pino.Logger): Promise<string | undefined> {
  const quiet = logger.child({}, { level: "silent" });
  // Nothing is fetched: a model not downloaded yet has no record, so no key.
  const registry = await loadRegistry(config, quiet, { fetch: "present" });
  const identities = await knownIdentities(config, registry, opened, quiet);
  if (!identities) return undefined;
  const { job, inputs, served } = source;
  return sha256Hex(canonicalJson({ kind: KIND, version: VERSION, requests: requestFields(job), inputs, served, identities }));
}

function answersOf(stored: StoredAnswer | undefined): JobAnswers | undefined {
  const b = stored?.body as Partial<JobAnswers> & { object?: unknown; version?: unknown };
  if (!b || b.object !== KIND || b.version !== VERSION || typeof b.results !== "string" || typeof b.rows !== "number") return undefined;
  if (!Array.isArray(b.columns)) return undefined;
  const { promptTokens, completionTokens } = stored!.usage;
  return { rows: b.rows, columns: b.columns, results: b.results, usage: { promptTokens, completionTokens } };
}

/**
 * Whether each request line's body is deterministic. Read as written: each was checked as its endpoint checks a
 * request when it was made, and the fields the rule reads are plain numbers there.
 */
function everyDeterministic(job: Job, requests: string): boolean {
  for (const line of requests.split("\n")) {
    if (!line) continue;
    const { body } = JSON.parse(line) as { body: Record<string, unknown> };
    if (!isDeterministic({ endpoint: job.endpoint, body } as InferenceRequest)) return false;
  }
  return true;
}

/** The results file with each row told as a hit is: its whole prompt cached. And the rows' usage, summed. */
function toldAsHits(results: string): { text: string; usage: { promptTokens: number; completionTokens: number } } {
  const usage = { promptTokens: 0, completionTokens: 0 };
  const lines = results.split("\n").map((line) => {
    if (!line) return line;
    const row = JSON.parse(line) as Record<string, unknown>;
    if (typeof row.prompt_tokens === "number") usage.promptTokens += row.prompt_tokens;
    if (typeof row.completion_tokens === "number") usage.completionTokens += row.completion_tokens;
    if ("cached_tokens" in row && typeof row.prompt_tokens === "number") row.cached_tokens = row.prompt_tokens;
    return JSON.stringify(row);
  });
  return { text: lines.join("\n"), usage };
}
