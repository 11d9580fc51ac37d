// An API server's synchronous request (ROLE=api runs no model), sent on to a worker that serves its model and its
// answer relayed as the worker gives it: the status, the body, or the stream event by event. A worker that cannot
// be reached, or that is full (429) or shutting down (503) before it answers, passes the request to the next; one
// that dies, freezes or is cut off mid-stream (its heartbeat lapses) ends the stream with an error event the
// clients raise, never a hang or a cut event.
import type { Request, Response } from "express";
import type { SyncTargets } from "../../domain/sync-inference.js";
import type { Endpoint } from "../../openai/backend.js";
import { anthropicErrorBody } from "../anthropic.js";
import { ApiError } from "../errors.js";
import { SseWriter } from "./sse.js";

/** The client's headers a worker needs: its key (checked again there) and Anthropic's version headers. */
const PASSED = ["authorization", "x-api-key", "anthropic-version", "anthropic-beta", "x-request-id", "cache-control"];
/** A worker's answers that another worker may give better: it is full, or going away. */
const TRY_ANOTHER = new Set([429, 503]);
/** How many workers a request is offered to. */
const MAX_TRIES = 2;

export async function forwardSync(targets: SyncTargets, endpoint: Endpoint, req: Request, res: Response, gone: AbortSignal) {
  const candidates = (await targets.pick((req.body as { model?: unknown } | undefined)?.model)).slice(0, MAX_TRIES);
  const headers: Record<string, string> = { "content-type": "application/json" };
  for (const h of PASSED) {
    const v = req.headers[h] ?? (h === "x-request-id" ? res.getHeader("x-request-id") : undefined);
    if (typeof v === "string") headers[h] = v;
  }
  const body = JSON.stringify(req.body);
  for (const [i, target] of candidates.entries()) {
    const ended = target.sending();
    // A worker that freezes or is cut off sends nothing more: once its heartbeat lapses the request is given up.
    const lost = new AbortController();
    const unwatch = targets.watch(target.url, () => lost.abort(workerLost()));
    const signal = AbortSignal.any([gone, lost.signal]);
    try {
      const answer = await fetch(`${target.url}${endpoint}`, { method: "POST", headers, body, signal }).catch(() => undefined);
      if (gone.aborted) return;
      const last = i === candidates.length - 1;
      if (!answer || (TRY_ANOTHER.has(answer.status) && !last)) {
        await answer?.body?.cancel().catch(() => undefined);
        continue;
      }
      return await relay(answer, endpoint, res, gone);
    } finally {
      unwatch();
      ended();
    }
  }
  throw new ApiError(503, "No worker serving this model could be reached; retry shortly.", "server_error", "backend_unavailable", null, {
    "Retry-After": "1",
  });
}

async function relay(answer: globalThis.Response, endpoint: Endpoint, res: Response, gone: AbortSignal): Promise<void> {
  const type = answer.headers.get("content-type") ?? "application/json";
  const retryAfter = answer.headers.get("retry-after");
  if (retryAfter) res.setHeader("Retry-After", retryAfter);
  if (!type.startsWith("text/event-stream")) {
    const text = await answer.text().catch(() => undefined);
    if (text === undefined) throw workerLost();
    res.status(answer.status).type(type).send(text);
    return;
  }
  res.status(answer.status).set({ "Content-Type": type, "Cache-Control": "no-cache", Connection: "keep-alive" });
  res.flushHeaders();
  // Whole events only: a worker lost mid-event leaves no half event before the error event.
  let pending = "";
  const decoder = new TextDecoder();
  try {
    for await (const chunk of answer.body as AsyncIterable<Uint8Array>) {
      pending += decoder.decode(chunk, { stream: true });
      const cut = pending.lastIndexOf("\n\n");
      if (cut === -1) continue;
      res.write(pending.slice(0, cut + 2));
      pending = pending.slice(cut + 2);
    }
    if (pending.trim() !== "") throw new Error("the worker's stream ended inside an event");
    res.end();
  } catch {
    if (gone.aborted) return;
    const error = workerLost();
    const id = res.getHeader("x-request-id");
    new SseWriter(res).fail(error, endpoint === "/v1/messages" ? anthropicErrorBody(error, typeof id === "string" ? id : null) : undefined);
  }
}

const workerLost = () =>
  new ApiError(
    503,
    "The worker answering this request stopped before the answer ended; retry the request.",
    "server_error",
    "backend_unavailable",
    null,
    { "Retry-After": "1" },
  );
