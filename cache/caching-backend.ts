// Any InferenceBackend made to compute a deterministic request's answer once (cache/rule.ts): identical requests in
// flight share one computation (single flight), an answer already in the ResultCache is read, a new one is stored.
// Each answer it did not compute for the caller gets its own id and created time, the rest of the body as computed;
// a failed computation fails each request that shared it, and is never stored.
import type { BackendInfo, BackendResult, ExecuteOptions, InferenceBackend, InferenceRequest } from "../openai/backend.js";
import { hexId } from "../openai/ids.js";
import { cacheKey } from "./key.js";
import type { ResultCache, StoredAnswer } from "./port.js";
import { isDeterministic } from "./rule.js";

/** The scope of a request whose caller names none: the open API's, one for every caller. */
export const OPEN_SCOPE = "open";

/** How a request was answered, for the counts and metrics that follow them. */
export type CacheOutcome = "computed" | "duplicate" | "hit" | "bypass";

export interface CachingOptions {
  cache: ResultCache;
  /**
   * The model's identity (cache/model-identity.ts); a promise while a local file is being hashed. Null: it could not
   * be known (the file could not be read), and every request computes.
   */
  identity: string | null | Promise<string | null>;
  /** Each request as it is answered, with the model that serves it (the wrapped backend's). */
  onOutcome?: (outcome: CacheOutcome, model: string) => void;
  /** A store that failed a read or a write: the request is answered as if there were no cache. */
  onStoreError?: (err: unknown) => void;
}

/** What identical requests in flight share: the answer, and whether the store held it. */
interface Shared {
  answer: StoredAnswer;
  hit: boolean;
}

/** A computation under way, with the signal of the request that runs it. */
interface InFlight {
  answer: Promise<Shared>;
  signal?: AbortSignal;
  /** Its answer was computed (not read from the store): it is being stored. */
  computed?: boolean;
  /** Settles once the answer is stored, or was not to be (a hit, a failure). */
  stored: Promise<void>;
}

const PASSED_ON = ["lineOrder", "prepareRun", "countTokens", "promptTokens", "stats", "preemptions"] as const;

export class CachingBackend implements InferenceBackend {
  readonly info: BackendInfo;
  lineOrder?: InferenceBackend["lineOrder"];
  prepareRun?: InferenceBackend["prepareRun"];
  countTokens?: InferenceBackend["countTokens"];
  promptTokens?: InferenceBackend["promptTokens"];
  stats?: InferenceBackend["stats"];
  preemptions?: InferenceBackend["preemptions"];
  readonly storesRemotely: boolean;
  /** Computations under way by scope and key. */
  private readonly inFlight = new Map<string, InFlight>();
  /** Answers being stored: a close waits for them. */
  private readonly storing = new Set<Promise<unknown>>();

  constructor(
    private readonly inner: InferenceBackend,
    private readonly opts: CachingOptions,
  ) {
    this.info = inner.info;
    this.storesRemotely = opts.cache.remote === true;
    for (const name of PASSED_ON) {
      const method = inner[name] as ((...args: never[]) => unknown) | undefined;
      if (method) (this as Record<string, unknown>)[name] = method.bind(inner);
    }
  }

  check(request: InferenceRequest): void {
    this.inner.check(request);
  }

  async execute(request: InferenceRequest, signal?: AbortSignal, options: ExecuteOptions = {}): Promise<BackendResult> {
    const place = await this.placeOf(request, options);
    if (!place) {
      this.opts.onOutcome?.("bypass", this.info.model);
      return this.inner.execute(request, signal, options);
    }
    const { scope, key } = place;
    const flight = `${scope}\u0000${key}`;
    for (;;) {
      const running = this.inFlight.get(flight);
      if (!running) break;
      // An answer computed before this request came (being stored now) is a hit, as it will be once stored.
      const before = running.computed === true;
      options.onBackendDone?.();
      try {
        const shared = await abortable(running.answer, signal);
        if (options.waitForStore) await running.stored;
        return this.told(shared.answer, shared.hit || before ? "hit" : "duplicate", options);
      } catch (err) {
        // The computation was called off by its own caller, not this one: this request computes it anew.
        if (signal?.aborted || !running.signal?.aborted) throw err;
        if (this.inFlight.get(flight) === running) this.inFlight.delete(flight);
      }
    }
    return this.lead(request, signal, options, scope, key, flight);
  }

  async close(): Promise<void> {
    await Promise.all(this.storing);
    return this.inner.close();
  }

  /**
   * Whether a repeat of this request would be answered from the store now: deterministic, the cache used, and an
   * answer stored in the scope. A plan asks it, so a read that fails is a no, never an error.
   */
  async remembered(request: InferenceRequest, options: Pick<ExecuteOptions, "cacheScope" | "useCache"> = {}): Promise<boolean> {
    const place = await this.placeOf(request, options);
    if (!place) return false;
    const has = this.opts.cache.has;
    const { scope, key } = place;
    if (this.inFlight.get(`${scope}\u0000${key}`)?.computed) return true;
    try {
      return has ? await has.call(this.opts.cache, scope, key) : (await this.opts.cache.get(scope, key)) !== undefined;
    } catch {
      return false;
    }
  }

  /** A hit answered at once (InferenceBackend.answerFromCache): the store's answer, else undefined. */
  async answerFromCache(
    request: InferenceRequest,
    options: Pick<ExecuteOptions, "cacheScope" | "useCache"> = {},
  ): Promise<BackendResult | undefined> {
    const place = await this.placeOf(request, options);
    const stored = place && (await this.read(place.scope, place.key));
    // The store's answer is this caller's alone (ResultCache.get), so its body is given new ids where it lies.
    return stored ? this.told(stored, "hit", {}, true) : undefined;
  }

  /**
   * Where the request's answer is kept: its scope and key; null where it is not shared (sampled, the cache turned off
   * for it, or the model's identity unknown).
   */
  private async placeOf(
    request: InferenceRequest,
    options: Pick<ExecuteOptions, "cacheScope" | "useCache">,
  ): Promise<{ scope: string; key: string } | null> {
    const identity = options.useCache === false || !isDeterministic(request) ? null : await this.opts.identity;
    return identity === null ? null : { scope: options.cacheScope ?? OPEN_SCOPE, key: cacheKey(identity, request) };
  }

  /**
   * The first of identical requests: reads the store, else computes and stores, while the others wait for it. It is
   * in flight from before its read, so a duplicate arriving during the read waits rather than computing too.
   */
  private async lead(
    request: InferenceRequest,
    signal: AbortSignal | undefined,
    options: ExecuteOptions,
    scope: string,
    key: string,
    flight: string,
  ): Promise<BackendResult> {
    let computed: Promise<BackendResult> | undefined;
    const shared = (async (): Promise<Shared> => {
      const stored = await this.read(scope, key);
      if (stored) return { answer: stored, hit: true };
      computed = this.inner.execute(request, signal, options);
      const { body, usage, stops } = await computed;
      return { answer: { body, usage, ...(stops ? { stops } : {}) }, hit: false };
    })();
    // Awaited by the duplicates only, if any: a failure is reported to this caller below.
    shared.catch(() => undefined);
    let stored = () => {};
    this.inFlight.set(flight, { answer: shared, signal, stored: new Promise<void>((r) => (stored = r)) });
    // Out of flight once stored, or once there is nothing to store (a hit, a failure): the duplicates waiting for the
    // store are let go with it.
    const land = () => {
      if (this.inFlight.get(flight)?.answer === shared) this.inFlight.delete(flight);
      stored();
    };
    let storing = false;
    try {
      const { answer, hit } = await shared;
      if (hit) return this.told(answer, "hit", options);
      this.opts.onOutcome?.("computed", this.info.model);
      storing = true;
      const entry = this.inFlight.get(flight);
      if (entry?.answer === shared) entry.computed = true;
      const put = this.store(scope, key, answer, land);
      options.onBackendDone?.();
      if (options.waitForStore) await put;
      return (await computed) as BackendResult;
    } finally {
      if (!storing) land();
    }
  }

  /**
   * The answer stored behind the caller's back, unless it waits for the store (ExecuteOptions.waitForStore): a
   * request answered at once has its answer as soon as it is computed. Duplicates arriving meanwhile still share it
   * (it stays in flight until stored); a close waits for every store. A store that fails is reported, never thrown.
   */
  private store(scope: string, key: string, answer: StoredAnswer, landed: () => void): Promise<unknown> {
    const put = this.opts.cache
      .put(scope, key, answer)
      .catch((err) => this.opts.onStoreError?.(err))
      .finally(() => {
        landed();
        this.storing.delete(put);
      });
    this.storing.add(put);
    return put;
  }

  private async read(scope: string, key: string): Promise<StoredAnswer | undefined> {
    try {
      return await this.opts.cache.get(scope, key);
    } catch (err) {
      this.opts.onStoreError?.(err);
      return undefined;
    }
  }

  /**
   * An answer not computed for this caller, told to it as a computed one would have been, with ids of its own;
   * `owned`: no other caller holds it, and its body is changed in place rather than copied.
   */
  private told(a: StoredAnswer, how: "duplicate" | "hit", options: ExecuteOptions, owned = false): BackendResult {
    this.opts.onOutcome?.(how, this.info.model);
    options.onBegin?.();
    // Every prompt token of an answer not computed counts as cached, as OpenAI's prompt caching reports a prefix read.
    const usage = { ...a.usage, cachedTokens: a.usage.promptTokens };
    options.onPrompt?.({ promptTokens: usage.promptTokens, cachedTokens: usage.cachedTokens });
    const body = cachedUsage(freshIds(owned ? a.body : structuredClone(a.body)));
    // Told once, word by word as a stream tells it (a client's stream of a remembered answer still streams).
    if (options.onText)
      for (const [choice, text] of choiceTexts(body)) for (const piece of text ? text.split(WORD_START) : []) options.onText(choice, piece);
    return { body, usage, ...(a.stops ? { stops: [...a.stops] } : {}), cached: how };
  }
}

/** Where a word begins after white space: the pieces a remembered answer is told in, which join back into it. */
const WORD_START = /(?<=\s)(?=\S)/;

/** Waits for `p`, or rejects as soon as `signal` aborts (the shared computation goes on for the others). */
export function abortable<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** The body given an id of its own (the same prefix, new random hex) and the times of now, in place. */
export function freshIds(copy: Record<string, unknown>): Record<string, unknown> {
  if (typeof copy.id === "string") {
    const m = /^(.*[-_])([0-9A-Za-z]+)$/.exec(copy.id);
    copy.id = m ? `${m[1]}${hexId(Math.max(4, Math.ceil(m[2].length / 2))).slice(0, m[2].length)}` : copy.id;
  }
  const now = Math.floor(Date.now() / 1000);
  for (const field of ["created", "created_at", "completed_at"]) if (typeof copy[field] === "number") copy[field] = now;
  return copy;
}

/**
 * A body whose usage says all its prompt was cached: `prompt_tokens_details.cached_tokens` (chat, completions) or
 * `input_tokens_details.cached_tokens` (Responses), as OpenAI reports a cached prompt; an Anthropic message's
 * `cache_read_input_tokens`. Others are left as they are.
 */
export function cachedUsage(body: Record<string, unknown>): Record<string, unknown> {
  const u = body.usage as Record<string, unknown> | undefined;
  if (!u || typeof u !== "object") return body;
  if (body.type === "message") return cachedMessageUsage(body, u);
  const [tokens, details] =
    body.object === "response"
      ? ["input_tokens", "input_tokens_details"]
      : body.object === "chat.completion" || body.object === "text_completion"
        ? ["prompt_tokens", "prompt_tokens_details"]
        : [];
  if (!tokens || !details || typeof u[tokens] !== "number") return body;
  const had = u[details] && typeof u[details] === "object" ? (u[details] as object) : {};
  u[details] = { ...had, cached_tokens: u[tokens] };
  return body;
}

/**
 * An Anthropic message's usage with all its prompt read from the cache: Anthropic counts `input_tokens` apart from
 * `cache_read_input_tokens`, so the whole prompt moves to the latter, as message_start tells a streamed hit.
 */
function cachedMessageUsage(body: Record<string, unknown>, u: Record<string, unknown>): Record<string, unknown> {
  const n = (k: string) => (typeof u[k] === "number" ? (u[k] as number) : 0);
  const prompt = n("input_tokens") + n("cache_read_input_tokens") + n("cache_creation_input_tokens");
  body.usage = { ...u, input_tokens: 0, cache_read_input_tokens: prompt, cache_creation_input_tokens: 0 };
  return body;
}

type Part = { type?: unknown; text?: unknown; content?: unknown };
const textOf = (parts: unknown, type: string): string =>
  Array.isArray(parts) ? (parts as Part[]).map((p) => (p?.type === type && typeof p.text === "string" ? p.text : "")).join("") : "";

/**
 * Each choice's text, as a stream would have told it: a chat message's content, a completion's text; the one answer
 * of a Responses body (its messages' output_text) and of an Anthropic message (its text blocks).
 */
function choiceTexts(body: Record<string, unknown>): Array<[number, string]> {
  if (body.object === "response" && Array.isArray(body.output))
    return [[0, (body.output as Part[]).map((item) => (item?.type === "message" ? textOf(item.content, "output_text") : "")).join("")]];
  if (body.type === "message" && Array.isArray(body.content)) return [[0, textOf(body.content, "text")]];
  const choices = Array.isArray(body.choices) ? (body.choices as Array<Record<string, unknown>>) : [];
  return choices.map((c, i) => {
    const index = typeof c.index === "number" ? c.index : i;
    const message = c.message as { content?: unknown } | undefined;
    const text = typeof c.text === "string" ? c.text : typeof message?.content === "string" ? message.content : "";
    return [index, text];
  });
}

/**
 * A backend whose every request carries these cache options (a batch's scope, and its `metadata.cache`), for
 * callers that run a whole batch over one backend without passing options per request.
 */
export function withCacheOptions(backend: InferenceBackend, cache: Pick<ExecuteOptions, "cacheScope" | "useCache">): InferenceBackend {
  const view: InferenceBackend = {
    info: backend.info,
    check: (request) => backend.check(request),
    execute: (request, signal, options) => backend.execute(request, signal, { ...cache, ...options }),
    close: () => backend.close(),
  };
  if (backend.remembered) view.remembered = (request, options) => backend.remembered!(request, { ...cache, ...options });
  if (backend.answerFromCache) view.answerFromCache = (request, options) => backend.answerFromCache!(request, { ...cache, ...options });
  if (backend.storesRemotely) view.storesRemotely = true;
  for (const name of PASSED_ON) {
    const method = backend[name] as ((...args: never[]) => unknown) | undefined;
    if (method) (view as unknown as Record<string, unknown>)[name] = method.bind(backend);
  }
  return view;
}

/** The cache options of a batch: its key's scope, and off where its metadata says `cache: "off"`. */
export const batchCacheOptions = (scope: string | null, metadata: Readonly<Record<string, string>> | null | undefined) => ({
  cacheScope: scope ?? OPEN_SCOPE,
  useCache: metadata?.cache !== "off",
});
