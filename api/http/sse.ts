// Server-Sent Events as OpenAI's streams send them: `data: <json>` events, `data: [DONE]` at the end, and an error
// after the stream began as one last event holding `{error}` (which the official clients raise as an APIError);
// Anthropic's name each event (`event: message_start`) and end with `message_stop`, an error as `event: error`.
// The headers go out with the first event, so a refusal before it is still an ordinary HTTP error.
import type { Response } from "express";
import type { ApiError } from "../errors.js";

export class SseWriter {
  constructor(private readonly res: Response) {}

  get started(): boolean {
    return this.res.headersSent;
  }

  /** One event; `event` names it (Anthropic's streams name each event, OpenAI's do not). */
  send(data: unknown, event?: string): void {
    if (this.res.writableEnded || this.res.destroyed) return;
    if (!this.res.headersSent) {
      this.res
        .status(200)
        .set({ "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", Connection: "keep-alive" });
      this.res.flushHeaders();
    }
    this.res.write(`${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`);
  }

  /** The end of a stream whose last event says it ended (Anthropic's `message_stop`). */
  end(): void {
    if (!this.res.writableEnded && !this.res.destroyed) this.res.end();
  }

  /** OpenAI's end of stream. */
  done(): void {
    if (this.res.writableEnded || this.res.destroyed) return;
    this.res.end("data: [DONE]\n\n");
  }

  /** The stream's last event: the error, as OpenAI's body, or Anthropic's (`event: error`) where `anthropic` gives it. */
  fail(error: ApiError, anthropic?: unknown): void {
    if (anthropic) this.send(anthropic, "error");
    else this.send(error.toBody());
    this.res.end();
  }
}
