// The request log's levels: an error is a fault of the service; a refusal that says when to come back is not.
import express from "express";
import pino from "pino";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { errorHandler } from "../../api/http/error-handler.js";
import { redactUrl, requestLogger } from "../../api/http/request-log.js";
import { databaseUnavailable, shuttingDown } from "../../domain/errors.js";

function logged() {
  const lines: Array<{ level: number; err?: unknown; res?: { statusCode: number } }> = [];
  const logger = pino({ level: "debug" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  const app = express();
  app.use(requestLogger(logger));
  app.get("/db-down", () => {
    throw databaseUnavailable(new Error("connect ECONNREFUSED 127.0.0.1:5432"));
  });
  app.get("/stopping", () => {
    throw shuttingDown(5);
  });
  app.get("/boom", () => {
    throw new Error("a fault of the service");
  });
  app.get("/ok", (_req, res) => void res.json({ ok: true }));
  app.use(errorHandler({ maxFileBytes: 1024 }));
  return { app, lines };
}

describe("the request log", () => {
  it("logs a 503 with Retry-After (an outage, a stop) as a warning without its cause, a 500 as an error with it", async () => {
    const { app, lines } = logged();
    expect((await request(app).get("/db-down")).status).toBe(503);
    expect((await request(app).get("/stopping")).status).toBe(503);
    expect((await request(app).get("/boom")).status).toBe(500);
    expect((await request(app).get("/ok")).status).toBe(200);
    const byStatus = (s: number) => lines.filter((l) => l.res?.statusCode === s);
    expect(byStatus(503).map((l) => l.level)).toEqual([40, 40]);
    // Its cause is the outage's log line, said once, not each request's.
    for (const l of byStatus(503)) expect(JSON.stringify(l)).not.toMatch(/ECONNREFUSED/);
    expect(byStatus(500).map((l) => l.level)).toEqual([50]);
    expect(byStatus(500)[0].err).toMatchObject({ message: "a fault of the service" });
    expect(byStatus(200).map((l) => l.level)).toEqual([30]);
  });
});

describe("a logged URL", () => {
  it("never holds a credential: a key-like parameter's value, or an Authorization-like value anywhere", async () => {
    const { app, lines } = logged();
    const secret = "sk-live-3b9f01c7d2e4a8";
    for (const url of [
      `/ok?api_key=${secret}`,
      `/ok?limit=2&access_token=${secret}&after=batch_1`,
      `/ok?KEY=${secret}`,
      `/ok?q=${encodeURIComponent(`Bearer ${secret}`)}`,
      `/ok?x=${encodeURIComponent(secret)}`,
      `/ok/${encodeURIComponent(`Bearer ${secret}`)}`,
      `/ok?client_secret=whsec_abc&password=hunter2`,
    ])
      await request(app).get(url);
    const urls = lines.filter((l: any) => l.req).map((l: any) => l.req.url as string);
    expect(urls).toEqual([
      "/ok?api_key=[redacted]",
      "/ok?limit=2&access_token=[redacted]&after=batch_1",
      "/ok?KEY=[redacted]",
      "/ok?q=[redacted]",
      "/ok?x=[redacted]",
      "/ok/[redacted]",
      "/ok?client_secret=[redacted]&password=[redacted]",
    ]);
    expect(JSON.stringify(lines)).not.toMatch(/sk-live|hunter2|whsec_abc/);
  });

  it("keeps what names a key without being one, and every other parameter", () => {
    expect(redactUrl("/v1/batches?api_key_id=teamA&limit=5&after=batch_abc")).toBe("/v1/batches?api_key_id=teamA&limit=5&after=batch_abc");
    expect(redactUrl("/v1/files/file-abc/content")).toBe("/v1/files/file-abc/content");
  });
});
