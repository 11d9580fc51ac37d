// Serves /v1/responses over a backend's /v1/chat/completions (openai/responses.ts translates each way), so
// every backend that serves chat serves Responses lines too, with the same checks and refusals.
import type { BackendInfo, BackendResult, InferenceBackend, InferenceRequest } from "./backend.js";
import { parseRequest } from "./parse.js";
import type { ResponseBody } from "./response-bodies.js";
import { renamed, type TranslatedRequest, toChatBody, toResponseObject } from "./responses.js";

export function withResponses(inner: InferenceBackend): InferenceBackend {
  const { endpoints } = inner.info;
  if (!endpoints.includes("/v1/chat/completions") || endpoints.includes("/v1/responses")) return inner;
  return new ResponsesOverChat(inner);
}

class ResponsesOverChat implements InferenceBackend {
  readonly info: BackendInfo;

  constructor(private readonly inner: InferenceBackend) {
    this.info = Object.freeze({ ...inner.info, endpoints: [...inner.info.endpoints, "/v1/responses" as const] });
    if (inner.stats) this.stats = () => inner.stats!();
  }

  stats?: InferenceBackend["stats"];

  check(request: InferenceRequest): void {
    if (request.endpoint !== "/v1/responses") {
      this.inner.check(request);
      return;
    }
    const { chat, origins } = this.translate(request.body);
    try {
      this.inner.check(chat);
    } catch (err) {
      throw renamed(err, origins);
    }
  }

  async execute(request: InferenceRequest, signal?: AbortSignal): Promise<BackendResult> {
    if (request.endpoint !== "/v1/responses") return this.inner.execute(request, signal);
    const { chat, origins } = this.translate(request.body);
    try {
      const r = await this.inner.execute(chat, signal);
      return { body: toResponseObject(request.body, r.body as never), usage: r.usage };
    } catch (err) {
      throw renamed(err, origins);
    }
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  /** The chat request, checked against the chat schema as a line of its own would be. */
  private translate(body: ResponseBody): { chat: InferenceRequest; origins: TranslatedRequest["origins"] } {
    const { chat, origins } = toChatBody(body);
    try {
      return { chat: parseRequest("/v1/chat/completions", chat), origins };
    } catch (err) {
      throw renamed(err, origins);
    }
  }
}
