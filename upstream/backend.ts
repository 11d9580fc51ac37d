// An OpenAI-compatible server (vLLM, llama-server, SGLang, Ollama, a hosted API) as an InferenceBackend. Bodies
// go out as the line wrote them with `model` set to the upstream's name, and come back as the upstream sent
// them with `model` set to the registry's name; usage is read from them. One keep-alive connection pool per
// base URL (undici), an adaptive limit on requests in flight (adaptive-limit.ts), retries with backoff and
// Retry-After (retry.ts), failing URLs taken out for a while (base-urls.ts). A 4xx other than 408 and 429 is
// the request's own answer: its error line carries the upstream's status and body, except a context overflow,
// which is OpenAI's context_length_exceeded naming the field (context-limit.ts).
import { setTimeout as sleep } from "node:timers/promises";
import { Pool } from "undici";
import type {
  BackendInfo,
  BackendResult,
  BackendStats,
  Endpoint,
  ExecuteOptions,
  InferenceBackend,
  InferenceRequest,
  Lane,
  LinePreference,
  TokenUsage,
} from "../openai/backend.js";
import { RequestError } from "../openai/errors.js";
import { type RankRequest, rankBody, rankPairs } from "../openai/rank.js";
import { AdaptiveLimit, type Outcome } from "./adaptive-limit.js";
import { backoffMs, isRetryableStatus, retryAfterMs } from "./backoff.js";
import { BaseUrls } from "./base-urls.js";
import { contextCut, contextRefusal, probeContext, reportedContext } from "./context-limit.js";
import { ignoredEcho } from "./echo-check.js";
import { ORDER_FOR, type PrefixRouting, type Routing, resolveRouting } from "./slot-affinity.js";

export interface UpstreamOptions {
  /** The registry's name: what batches and response bodies say. */
  name: string;
  baseUrls: readonly string[];
  /** The upstream's own name for the model. */
  model: string;
  apiKey?: string;
  minInFlight: number;
  maxInFlight: number;
  timeoutSeconds: number;
  maxAttempts: number;
  /** How lines reach the server so it evaluates shared prompt openings least (slot-affinity.ts); default "auto". */
  prefixRouting?: PrefixRouting;
  /** For tests: the random source of the backoff jitter. */
  random?: () => number;
}

export interface UpstreamStats extends BackendStats {
  bestLatencyMs: number;
  baseUrls: ReturnType<BaseUrls["status"]>;
}

/** How a request is sent: in which lane, and who is told when it begins (ExecuteOptions). */
interface Sending {
  lane?: Lane;
  onBegin?: () => void;
}

const SERVED: readonly Endpoint[] = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/rerank", "/v1/score"];

/** A base URL without credentials, for logs and metrics. */
export function redactUrl(url: string): string {
  const u = new URL(url);
  u.username = "";
  u.password = "";
  return u.toString().replace(/\/$/, "");
}

export class UpstreamBackend implements InferenceBackend {
  readonly info: BackendInfo;
  readonly limit: AdaptiveLimit;
  private readonly urls: BaseUrls;
  /** Each base URL's connection pool (one per origin, shared) and path prefix, parsed once. */
  private readonly targets = new Map<string, { pool: Pool; prefix: string }>();
  private readonly counters = { requests: 0, retries: 0, errors: {} as Record<string, number> };
  /** The model's context as the upstream reported it (a refusal's n_ctx, else asked once); undefined if unknown. */
  private context: Promise<number | undefined> | undefined;
  /** The prefix routing in force, decided once (asking the server under "auto"); slot pinning where it is "slots". */
  private routing: Promise<Routing> | undefined;

  constructor(private readonly opts: UpstreamOptions) {
    this.limit = new AdaptiveLimit({
      min: opts.minInFlight,
      max: opts.maxInFlight,
      initial: Math.min(opts.maxInFlight, Math.max(opts.minInFlight, 4)),
    });
    this.urls = new BaseUrls(opts.baseUrls);
    const pools = new Map<string, Pool>();
    for (const url of opts.baseUrls) {
      const { origin, pathname } = new URL(url);
      if (!pools.has(origin))
        pools.set(origin, new Pool(origin, { connections: opts.maxInFlight, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 }));
      this.targets.set(url, { pool: pools.get(origin)!, prefix: pathname.replace(/\/+$/, "") });
    }
    this.info = Object.freeze({
      model: opts.name,
      kind: "upstream",
      endpoints: SERVED,
      // The pipeline keeps this many requests ready; the adaptive limit decides how many are sent. Under slot
      // routing a line may wait here for its family's slot, so each slot should have its family's next lines at
      // hand: four per slot, or a freed slot would go to another family while its own next line is still unread.
      concurrency: (opts.prefixRouting ?? "auto") === "auto" || opts.prefixRouting === "slots" ? 4 * opts.maxInFlight : opts.maxInFlight,
      generatedModel: false,
      summary: `upstream ${opts.model} at ${opts.baseUrls.map(redactUrl).join(", ")}, ${opts.minInFlight}-${opts.maxInFlight} in flight`,
      settings: {
        upstream_model: opts.model,
        base_urls: opts.baseUrls.map(redactUrl).join(", "),
        min_in_flight: opts.minInFlight,
        max_in_flight: opts.maxInFlight,
        timeout_seconds: opts.timeoutSeconds,
        max_attempts: opts.maxAttempts,
        api_key: opts.apiKey ? "set" : "none",
        prefix_routing: opts.prefixRouting ?? "auto",
      },
    });
  }

  /** The line order the prefix routing asks for ("slots": families take turns, one per slot at a time). */
  async lineOrder(): Promise<LinePreference> {
    const { resolved } = await this.prefixRouting();
    return resolved.policy === "slots" ? { order: "interleave", lanes: resolved.slots } : { order: ORDER_FOR[resolved.policy] };
  }

  /** The routing in force, settled once an upstream answers (slot-affinity.ts: resolveRouting). */
  private prefixRouting(): Promise<Routing> {
    if (this.routing) return this.routing;
    const asked = resolveRouting(this.opts.prefixRouting ?? "auto", this.opts.baseUrls, this.opts.maxInFlight, (url) =>
      this.probe(url, "/props"),
    );
    this.routing = asked.then(({ settled, ...routing }) => {
      if (!settled) this.routing = undefined;
      return routing;
    });
    return this.routing;
  }

  /** A GET of the upstream's own route; undefined when it did not answer (unreachable, 408, 429, 5xx). */
  private async probe(baseUrl: string, path: string): Promise<{ status: number; body: unknown } | undefined> {
    try {
      const { status, text } = await this.get(baseUrl, path);
      if (status === 408 || status === 429 || status >= 500) return undefined;
      let body: unknown;
      try {
        body = status < 300 ? JSON.parse(text) : undefined;
      } catch {
        body = undefined;
      }
      return { status, body };
    } catch {
      return undefined;
    }
  }

  stats(): UpstreamStats {
    return { ...this.limit.stats(), ...this.counters, errors: { ...this.counters.errors }, baseUrls: this.urls.status() };
  }

  /** The upstream judges the body itself; only the endpoint must be one it serves. */
  check(request: InferenceRequest): void {
    if (!SERVED.includes(request.endpoint))
      throw new RequestError(`This backend does not serve ${request.endpoint}.`, "invalid_url", false);
  }

  async execute(request: InferenceRequest, signal?: AbortSignal, options?: ExecuteOptions): Promise<BackendResult> {
    const lane = options?.lane ?? "batch";
    this.check(request);
    this.counters.requests++;
    // top_k, which OpenAI's chat does not define, goes as vLLM's and llama-server's extension of it.
    const topK = request.endpoint === "/v1/chat/completions" && request.topK ? { top_k: request.topK } : {};
    const sending: Sending = { lane, onBegin: options?.onBegin };
    if (request.endpoint === "/v1/rerank" || request.endpoint === "/v1/score") return this.rank(request, signal, sending);
    const { slots } = await this.prefixRouting();
    // llama-server places an embedding's inputs itself (it takes no id_slot), so those are not pinned; nor is an
    // interactive request, which would wait there behind its family's batch lines.
    if (!slots || request.endpoint === "/v1/embeddings" || lane === "interactive")
      return this.sendWithRetries(request, JSON.stringify({ ...request.body, ...topK, model: this.opts.model }), signal, sending);
    const family = slots.familyOf(request.body as Record<string, unknown>);
    const slot = await slots.acquire(family, signal);
    try {
      // llama-server's own extension: the slot whose cache holds this family's opening.
      const payload = JSON.stringify({ ...request.body, ...topK, id_slot: slot, cache_prompt: true, model: this.opts.model });
      return await this.sendWithRetries(request, payload, signal, sending);
    } finally {
      slots.release(slot, family);
    }
  }

  /**
   * A rerank or score line as the upstream's /v1/rerank (vLLM and llama-server with --reranking serve it): one
   * request per distinct query with all its documents, every score asked for, then answered in this service's
   * bodies (openai/rank.ts), so both endpoints read alike whichever server ranked.
   */
  private async rank(request: RankRequest, signal?: AbortSignal, sending: Sending = {}): Promise<BackendResult> {
    const pairs = rankPairs(request);
    const byQuery = new Map<string, number[]>();
    for (const [i, [query]] of pairs.entries()) byQuery.set(query, [...(byQuery.get(query) ?? []), i]);
    const scores = pairs.map(() => 0);
    let promptTokens = 0;
    await Promise.all(
      [...byQuery].map(async ([query, at]) => {
        const documents = at.map((i) => pairs[i][1]);
        const rerank: RankRequest = { endpoint: "/v1/rerank", body: { query, documents } };
        const payload = JSON.stringify({ query, documents, top_n: documents.length, model: this.opts.model });
        const r = await this.sendWithRetries(rerank, payload, signal, sending);
        const results = (r.body as { results?: unknown }).results;
        if (!Array.isArray(results) || results.length !== documents.length)
          throw upstreamFault(
            200,
            `The upstream's rerank answer scores ${Array.isArray(results) ? results.length : "no"} of ${documents.length} documents.`,
          );
        for (const x of results as Array<{ index?: unknown; relevance_score?: unknown }>) {
          if (typeof x?.index !== "number" || typeof x.relevance_score !== "number" || at[x.index] === undefined)
            throw upstreamFault(200, "The upstream's rerank answer has a result without a valid index and relevance_score.");
          scores[at[x.index]] = x.relevance_score;
        }
        const u = (r.body as { usage?: { prompt_tokens?: unknown; total_tokens?: unknown } }).usage;
        promptTokens += typeof u?.prompt_tokens === "number" ? u.prompt_tokens : typeof u?.total_tokens === "number" ? u.total_tokens : 0;
      }),
    );
    return {
      body: rankBody(request, this.opts.name, scores, promptTokens),
      usage: { promptTokens, completionTokens: 0, cachedTokens: 0 },
    };
  }

  /**
   * One request with its retries, under the adaptive limit (an interactive one waits ahead of batch lines); it
   * begins (`onBegin`) once the limit lets it go.
   */
  private async sendWithRetries(
    request: InferenceRequest,
    payload: string,
    signal?: AbortSignal,
    { lane = "batch", onBegin }: Sending = {},
  ): Promise<BackendResult> {
    for (let attempt = 1; ; attempt++) {
      const startedAt = await this.limit.acquire(signal, lane);
      onBegin?.();
      const url = this.urls.pick();
      let outcome: Outcome = "error";
      let healthy = true;
      let failure: RequestError;
      let wait: number | undefined;
      const timeout = AbortSignal.timeout(this.opts.timeoutSeconds * 1000);
      try {
        const res = await this.send(url, request.endpoint, payload, signal ? AbortSignal.any([signal, timeout]) : timeout);
        if (res.status < 300) {
          const body = res.body;
          if (!body || typeof body !== "object")
            throw upstreamFault(res.status, "The upstream answered with a body that is not a JSON object.");
          outcome = "success";
          const cut = await contextCut(request.endpoint, request.body as Record<string, unknown>, body as Record<string, unknown>, () =>
            this.contextSize(url),
          );
          if (cut) throw cut;
          const unechoed =
            request.endpoint === "/v1/completions"
              ? ignoredEcho(request.body as Record<string, unknown>, body as Record<string, unknown>)
              : undefined;
          if (unechoed) throw unechoed;
          (body as Record<string, unknown>).model = this.opts.name;
          return { body: body as Record<string, unknown>, usage: usageOf(body), stops: stopsOf(body) };
        }
        this.count(String(res.status));
        const refusal = res.status < 500 ? contextRefusal(request.endpoint, request.body as Record<string, unknown>, res.body) : undefined;
        if (refusal) {
          const reported = reportedContext(res.body);
          if (reported !== undefined) this.context = Promise.resolve(reported);
          throw refusal;
        }
        failure = new RequestError(errorMessage(res.body, res.status), errorCode(res.body), false, null, res);
        if (!isRetryableStatus(res.status)) throw failure;
        // 429 and 503 mean "slow down"; other 5xx and 408 may be this URL's trouble.
        outcome = "overload";
        healthy = res.status === 429 || res.status === 503;
        wait = retryAfterMs(res.retryAfter);
      } catch (err) {
        if (err instanceof RequestError) throw err;
        if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : err;
        const timedOut = timeout.aborted;
        this.count(timedOut ? "timeout" : "connection");
        outcome = "overload";
        healthy = false;
        failure = transportFailure(url, err as Error, timedOut, this.opts.timeoutSeconds);
      } finally {
        this.limit.release(startedAt, outcome);
        this.urls.done(url, healthy);
      }
      if (attempt >= this.opts.maxAttempts) throw failure;
      this.counters.retries++;
      await sleep(wait ?? backoffMs(attempt, this.opts.random), undefined, { signal });
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled([...new Set([...this.targets.values()].map((t) => t.pool))].map((p) => p.close()));
  }

  private contextSize(url: string): Promise<number | undefined> {
    this.context ??= probeContext((path) => this.getJson(url, path), this.targets.get(url)!.prefix, this.opts.model).catch(() => undefined);
    return this.context;
  }

  /** A GET of the upstream's own (non-OpenAI) routes; undefined for anything but a 2xx with JSON. */
  private async getJson(baseUrl: string, path: string): Promise<unknown> {
    const { status, text } = await this.get(baseUrl, path);
    return status < 300 ? JSON.parse(text) : undefined;
  }

  private async get(baseUrl: string, path: string): Promise<{ status: number; text: string }> {
    const res = await this.targets.get(baseUrl)!.pool.request({
      method: "GET",
      path,
      headers: this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {},
      signal: AbortSignal.timeout(5_000),
    });
    return { status: res.statusCode, text: await res.body.text() };
  }

  private count(cause: string) {
    this.counters.errors[cause] = (this.counters.errors[cause] ?? 0) + 1;
  }

  private async send(baseUrl: string, endpoint: Endpoint, payload: string, signal: AbortSignal) {
    const target = this.targets.get(baseUrl)!;
    const res = await target.pool.request({
      method: "POST",
      path: `${target.prefix}${endpoint.replace(/^\/v1/, "")}`,
      headers: {
        "content-type": "application/json",
        ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}),
      },
      body: payload,
      signal,
    });
    const text = await res.body.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON: kept as text, and a 2xx without JSON is refused above.
    }
    return { status: res.statusCode, body, retryAfter: res.headers["retry-after"] };
  }
}

function usageOf(body: object): TokenUsage {
  const u = (body as { usage?: Record<string, unknown> }).usage ?? {};
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  const details = (u.prompt_tokens_details ?? {}) as Record<string, unknown>;
  return { promptTokens: num(u.prompt_tokens), completionTokens: num(u.completion_tokens), cachedTokens: num(details.cached_tokens) };
}

/** vLLM names the stop string that ended a choice (`stop_reason`); other servers do not, and then none is known. */
function stopsOf(body: object): Array<string | null> | undefined {
  const choices = (body as { choices?: Array<{ stop_reason?: unknown }> }).choices;
  if (!Array.isArray(choices)) return undefined;
  return choices.map((c) => (typeof c?.stop_reason === "string" ? c.stop_reason : null));
}

function errorMessage(body: unknown, status: number): string {
  const e = (body as { error?: { message?: unknown } } | null)?.error;
  const detail = typeof e?.message === "string" ? e.message : typeof body === "string" ? body.slice(0, 300) : "";
  return `The upstream answered ${status}${detail ? `: ${detail}` : "."}`;
}

function errorCode(body: unknown): string {
  const e = (body as { error?: { code?: unknown; type?: unknown } } | null)?.error;
  return typeof e?.code === "string" ? e.code : typeof e?.type === "string" ? e.type : "upstream_error";
}

function upstreamFault(status: number, message: string): RequestError {
  return new RequestError(message, "upstream_invalid_response", false, null, {
    status: 502,
    body: { error: { message, type: "server_error", param: null, code: "upstream_invalid_response", upstream_status: status } },
  });
}

/** A request that never got an answer: an error line that says why, as a 504 (timeout) or 502. */
function transportFailure(url: string, err: Error, timedOut: boolean, timeoutSeconds: number): RequestError {
  const code = timedOut ? "upstream_timeout" : "upstream_unreachable";
  const cause = (err as { code?: string }).code ?? err.name;
  const message = timedOut
    ? `The upstream at ${redactUrl(url)} did not answer within ${timeoutSeconds} s.`
    : `The upstream at ${redactUrl(url)} could not be reached (${cause}).`;
  return new RequestError(message, code, false, null, {
    status: timedOut ? 504 : 502,
    body: { error: { message, type: "server_error", param: null, code } },
  });
}
