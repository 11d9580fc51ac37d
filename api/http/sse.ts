// Server-Sent Events as OpenAI's streams send them: `data: <json>` events, `data: [DONE]` at the end, and an error
// after the stream began as one last event holding `{error}` (which the official clients raise as an APIError).
// The headers go out with the first event, so a refusal before it is still an ordinary HTTP error.
import type { Response } from "express";
import type { ApiError } from "../errors.js";

export class SseWriter {
  constructor(private readonly res: Response) {}

  get started(): boolean {
    return this.res.headersSent;
  }

  send(data: unknown): void {
    if (this.res.writableEnded || this.res.destroyed) return;
    if (!this.res.headersSent) {
      this.res
        .status(200)
        .set({ "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", Connection: "keep-alive" });
      this.res.flushHeaders();
    }
    this.res.write(`data: ${JSON.stringify(data)}\n\n`);
  }

  done(): void {
    if (this.res.writableEnded || this.res.destroyed) return;
    this.res.end("data: [DONE]\n\n");
  }

  fail(error: ApiError): void {
    this.send(error.toBody());
    this.res.end();
  }
}
