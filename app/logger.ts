// The service logger (pino), with keys redacted.
import { createRequire } from "node:module";
import pino from "pino";

/**
 * The service logger: JSON lines, one per event. Keys never reach a log line: auth headers are
 * redacted wherever they appear. NODE_ENV=development prints readable colored lines instead, through
 * pino-pretty (a dev dependency, so never needed in production; without it the output stays JSON).
 */
export function createLogger(level: string, env: Record<string, string | undefined> = process.env): pino.Logger {
  const pretty = env.NODE_ENV === "development" && isInstalled("pino-pretty");
  return pino({
    level,
    base: { service: "offline-batch-inference" },
    redact: {
      paths: ["req.headers.authorization", "headers.authorization", "authorization", "apiKey", "apiKeys", "sha256"],
      censor: "[redacted]",
    },
    ...(pretty && {
      transport: { target: "pino-pretty", options: { colorize: true, translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname,service" } },
    }),
  });
}

function isInstalled(name: string): boolean {
  try {
    createRequire(import.meta.url).resolve(name);
    return true;
  } catch {
    return false;
  }
}
