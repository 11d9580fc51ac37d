import pino from "pino";

/** The service logger. Keys never reach a log line: auth headers are redacted wherever they appear. */
export function createLogger(level: string): pino.Logger {
  return pino({
    level,
    base: { service: "offline-batch-inference" },
    redact: { paths: ["req.headers.authorization", "headers.authorization", "authorization", "apiKey", "apiKeys"], censor: "[redacted]" },
  });
}
