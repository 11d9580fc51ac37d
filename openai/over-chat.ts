// Serves request shapes other than chat (OpenAI's /v1/responses; another folder's, Anthropic's /v1/messages) over a
// backend's /v1/chat/completions, each by a Dialect that translates each way, so every backend that serves chat
// serves those lines too, with the same checks, and every refusal names the field of the request as it was written.
import type { BackendInfo, BackendResult, Endpoint, ExecuteOptions, InferenceBackend, InferenceRequest } from "./backend.js";
import { RequestError } from "./errors.js";
import { parseRequest } from "./parse.js";
import type { ResponseBody } from "./response-bodies.js";
import { responsesParam, toChatBody, toResponseObject } from "./responses.js";

/**
 * One request shape served over chat: how its (already checked) body becomes a chat body, with the chat-side
 * parameter named as the request wrote it, and how the chat completion becomes its answer.
 */
export interface Dialect {
  endpoint: Endpoint;
  toChat(body: never): { chat: unknown; topK?: number; rename(param: string): string | null };
  answer(body: never, completion: never, result: BackendResult): Record<string, unknown>;
}

/** OpenAI's Responses API over chat (openai/responses.ts translates each way). */
export const RESPONSES_DIALECT: Dialect = {
  endpoint: "/v1/responses",
  toChat(body: ResponseBody) {
    const { chat, origins } = toChatBody(body);
    return { chat, rename: (p) => responsesParam(p, origins) };
  },
  answer: (body: ResponseBody, completion: Parameters<typeof toResponseObject>[1]) => toResponseObject(body, completion),
};

/** The backend, serving each dialect's lines too where it serves chat and not that endpoint itself. */
export function overChat(inner: InferenceBackend, dialects: readonly Dialect[]): InferenceBackend {
  let backend = inner;
  for (const dialect of dialects) {
    const { endpoints } = backend.info;
    if (endpoints.includes("/v1/chat/completions") && !endpoints.includes(dialect.endpoint)) backend = new OverChat(backend, dialect);
  }
  return backend;
}

/** What a backend may have beside its requests: each is the inner backend's, where it has it. */
const PASSED_ON = ["lineOrder", "prepareRun", "countTokens", "stats", "preemptions"] as const;
type PassedOn = Pick<InferenceBackend, (typeof PASSED_ON)[number]>;

class OverChat implements InferenceBackend {
  readonly info: BackendInfo;
  lineOrder?: PassedOn["lineOrder"];
  prepareRun?: PassedOn["prepareRun"];
  countTokens?: PassedOn["countTokens"];
  stats?: PassedOn["stats"];
  preemptions?: PassedOn["preemptions"];

  constructor(
    private readonly inner: InferenceBackend,
    private readonly dialect: Dialect,
  ) {
    this.info = Object.freeze({ ...inner.info, endpoints: [...inner.info.endpoints, dialect.endpoint] });
    // Every one, or what the wrapped backend tells (its preemptions on /metrics, its tokenizer for the limits) is lost.
    for (const name of PASSED_ON) {
      const method = inner[name] as ((...args: never[]) => unknown) | undefined;
      if (method) (this as Record<string, unknown>)[name] = method.bind(inner);
    }
  }

  check(request: InferenceRequest): void {
    if (request.endpoint !== this.dialect.endpoint) {
      this.inner.check(request);
      return;
    }
    const { chat, rename } = this.translate(request.body);
    try {
      this.inner.check(chat);
    } catch (err) {
      throw renamed(err, rename);
    }
  }

  async execute(request: InferenceRequest, signal?: AbortSignal, options?: ExecuteOptions): Promise<BackendResult> {
    if (request.endpoint !== this.dialect.endpoint) return this.inner.execute(request, signal, options);
    const { chat, rename } = this.translate(request.body);
    try {
      const r = await this.inner.execute(chat, signal, options);
      return { body: this.dialect.answer(request.body as never, r.body as never, r), usage: r.usage };
    } catch (err) {
      throw renamed(err, rename);
    }
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  /** The chat request, checked against the chat schema as a line of its own would be. */
  private translate(body: unknown): { chat: InferenceRequest; rename: (param: string) => string | null } {
    let rename = (p: string): string | null => p;
    try {
      const t = this.dialect.toChat(body as never);
      rename = t.rename;
      const chat = parseRequest("/v1/chat/completions", t.chat);
      if (t.topK && chat.endpoint === "/v1/chat/completions") chat.topK = t.topK;
      return { chat, rename };
    } catch (err) {
      throw renamed(err, rename);
    }
  }
}

/** Re-throws a chat-side refusal with the request's own field named. */
function renamed(err: unknown, rename: (param: string) => string | null): unknown {
  if (!(err instanceof RequestError) || err.param === null) return err;
  const param = rename(err.param);
  if (param === err.param) return err;
  const message = err.message.split(`'${err.param}'`).join(`'${param}'`);
  return new RequestError(message, err.code, err.retryable, param, err.upstream);
}
